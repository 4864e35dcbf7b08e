// The CUDA backend: NVIDIA GPUs as backplane devices.
//
// Implements (BP_PluginApi, ABI 1.1):
//   probe            driver and devices, through libcuda.so.1 opened at run time;
//                    no context, no device memory, no threads
//   devices          name, memory total/free, attributes compute_capability,
//                    multiprocessor_count, pci_bus_id, uuid
//   memory           device memory; pinned host memory (BP_MEMORY_PINNED_HOST);
//                    memory_wrap adopts device memory another library
//                    allocated (checked with cuPointerGetAttribute; work on
//                    it is ordered after the legacy default stream)
//   copies           host<->device and device<->device (peer between GPUs where
//                    the driver allows it, staged by the driver otherwise), each
//                    sync and async; events are completion handles
//   convert_integers widening of unsigned integers by a device kernel; where
//                    the kernel cannot run (no code for this GPU, a driver the
//                    CUDA runtime cannot use) BP_ERROR_UNSUPPORTED saying why,
//                    so the caller widens on the host
//
// Ordering: every operation on a device runs on that device's one stream, so
// operations on one device complete in submission order (a conversion queued
// after an async upload sees the uploaded data). A device-to-device copy runs
// on the destination's stream after the work already queued on the source's.
//
// Contexts: a device's primary context is retained on its first use (an
// allocation or copy) and released by backend_destroy; the process keeps one
// more reference until exit (the static CUDA runtime's module lives in it). Every call pushes the
// context and pops it before returning, so the caller's current context is
// left as it was.
//
// Errors: inside the backend failures are backplane::plugin::Failure
// exceptions; each function below turns them into BP_Error (guarded). CUDA
// failures carry what was being done, the CUDA error name and text, e.g.
// "cuMemAlloc of 19.09 GiB on cuda:0 failed: CUDA_ERROR_OUT_OF_MEMORY: out of
// memory (free 3.20 GiB of 24.00 GiB)". Handles this backend did not hand out
// (or already released) are BP_ERROR_INVALID_ARGUMENT.
//
// Thread-safety: every function may be called from any thread, concurrently.
#ifndef BACKPLANE_PLUGINS_CUDA_CUDA_BACKEND_HPP
#define BACKPLANE_PLUGINS_CUDA_CUDA_BACKEND_HPP

#include <backplane/plugin.h>

namespace backplane::cuda {

inline constexpr BP_Capabilities kCapabilities =
    BP_CAPABILITY_PINNED_HOST | BP_CAPABILITY_ASYNC | BP_CAPABILITY_CONVERT_INTEGERS | BP_CAPABILITY_WRAP_MEMORY;

// The table's calls; see plugin.h for each contract.
BP_Error* backend_create(BP_BackendCreateArgs* args);
void backend_destroy(BP_Backend* backend);
BP_Error* probe(BP_ProbeArgs* args);
BP_Error* device_count(BP_DeviceCountArgs* args);
BP_Error* device_info(BP_DeviceInfoArgs* args);
BP_Error* memory_allocate(BP_MemoryAllocateArgs* args);
BP_Error* memory_free(BP_MemoryFreeArgs* args);
BP_Error* memory_wrap(BP_MemoryWrapArgs* args);
BP_Error* copy_to_device(BP_CopyToDeviceArgs* args);
BP_Error* copy_to_host(BP_CopyToHostArgs* args);
BP_Error* copy_device_to_device(BP_CopyDeviceToDeviceArgs* args);
BP_Error* copy_to_device_async(BP_CopyToDeviceArgs* args);
BP_Error* copy_to_host_async(BP_CopyToHostArgs* args);
BP_Error* copy_device_to_device_async(BP_CopyDeviceToDeviceArgs* args);
BP_Error* event_wait(BP_EventArgs* args);
BP_Error* event_query(BP_EventArgs* args);
void event_destroy(BP_Backend* backend, BP_Event* event);
BP_Error* convert_integers(BP_ConvertIntegersArgs* args);

}  // namespace backplane::cuda

#endif  // BACKPLANE_PLUGINS_CUDA_CUDA_BACKEND_HPP
