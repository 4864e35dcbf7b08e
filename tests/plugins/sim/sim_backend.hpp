// The simulated accelerator: a test-only backend that behaves like a discrete
// device without needing one, so the core's placement, staging and error paths
// can be exercised on any machine.
//
// Implements (ABI 1.2):
//   backend_create/destroy, probe, device_count, device_info (kind
//     ACCELERATOR, memory_free = memory_limit - bytes in use),
//   memory_allocate/free: BP_MEMORY_DEVICE is a separate host allocation
//     reachable only through the ABI copies (address out is a device address
//     the core must not dereference, as with CUDA);
//     BP_MEMORY_PINNED_HOST is ordinary 64-byte aligned host memory (address
//     out is its host pointer),
//   the three sync copies, and the three async copies, which run in order on
//     one worker thread per backend (started on the first async call, joined
//     by backend_destroy), so BP_CAPABILITY_ASYNC is set,
//   event_wait (returns the copy's error), event_query, event_destroy,
//   memory_wrap: an address inside a live device allocation of that device
//     (anything else is INVALID_ARGUMENT, a range past its end OUT_OF_RANGE);
//     the handle does not keep the memory alive, and memory_free on it waits
//     for every queued copy, as a device would have to.
// Not implemented: convert_integers (NULL; capability absent), host access to
// device memory (no BP_CAPABILITY_HOST_ADDRESSABLE).
//
// Options (string values, strict unsigned decimal integers):
//   devices        1..64, default 1: devices "sim:0".."sim:N-1".
//   memory_limit   bytes per device, default 1073741824 (1 GiB); a device
//                  allocation beyond what is left fails with
//                  BP_ERROR_OUT_OF_MEMORY naming the size asked and free/total.
//   fail_alloc_at  N >= 1: the Nth memory_allocate call of the backend (either
//                  kind, counting calls that pass argument checks) fails with
//                  BP_ERROR_OUT_OF_MEMORY. 0 (default): never.
//   fail_copy_at   N >= 1: the Nth copy of the backend (sync or async, any
//                  direction, counting copies that pass argument and range
//                  checks) fails with BP_ERROR_DEVICE and moves no data; for an
//                  async copy the error comes from event_wait, not from the
//                  submission. 0 (default): never.
//   copy_delay_us  0..60000000: each async copy sleeps this long on the worker
//                  before moving data, so overlap is observable. Default 0.
//   probe_priority 0..1000: the priority probe reports (ABI 1.2), in place of
//                  the table's 50. Default: the table's.
//
// DLPack: the table declares BACKPLANE_SIM_DLPACK_DEVICE_TYPE (a build
// define; 12, kDLExtDev, unless the build says otherwise), so DLPack export
// and import of device memory run on any machine without the core knowing
// the backend by name.
//
// Thread-safety: every call may come from any thread at once.
#ifndef BACKPLANE_TESTS_PLUGINS_SIM_SIM_BACKEND_HPP
#define BACKPLANE_TESTS_PLUGINS_SIM_SIM_BACKEND_HPP

#include <backplane/plugin.h>

#include <cstdint>

namespace backplane::sim {

inline constexpr char kBackendName[] = "sim";
#ifndef BACKPLANE_SIM_DLPACK_DEVICE_TYPE
#define BACKPLANE_SIM_DLPACK_DEVICE_TYPE 12
#endif
inline constexpr std::int32_t kDlpackDeviceType = BACKPLANE_SIM_DLPACK_DEVICE_TYPE;
inline constexpr std::int32_t kPriority = 50;
inline constexpr BP_Capabilities kCapabilities =
    BP_CAPABILITY_PINNED_HOST | BP_CAPABILITY_ASYNC | BP_CAPABILITY_WRAP_MEMORY;

BP_Error* backend_create(BP_BackendCreateArgs* args) noexcept;
void backend_destroy(BP_Backend* backend) noexcept;
BP_Error* probe(BP_ProbeArgs* args) noexcept;
BP_Error* device_count(BP_DeviceCountArgs* args) noexcept;
BP_Error* device_info(BP_DeviceInfoArgs* args) noexcept;
BP_Error* memory_allocate(BP_MemoryAllocateArgs* args) noexcept;
BP_Error* memory_free(BP_MemoryFreeArgs* args) noexcept;
BP_Error* memory_wrap(BP_MemoryWrapArgs* args) noexcept;
BP_Error* copy_to_device(BP_CopyToDeviceArgs* args) noexcept;
BP_Error* copy_to_host(BP_CopyToHostArgs* args) noexcept;
BP_Error* copy_device_to_device(BP_CopyDeviceToDeviceArgs* args) noexcept;
BP_Error* copy_to_device_async(BP_CopyToDeviceArgs* args) noexcept;
BP_Error* copy_to_host_async(BP_CopyToHostArgs* args) noexcept;
BP_Error* copy_device_to_device_async(BP_CopyDeviceToDeviceArgs* args) noexcept;
BP_Error* event_wait(BP_EventArgs* args) noexcept;
BP_Error* event_query(BP_EventArgs* args) noexcept;
void event_destroy(BP_Backend* backend, BP_Event* event) noexcept;

}  // namespace backplane::sim

#endif  // BACKPLANE_TESTS_PLUGINS_SIM_SIM_BACKEND_HPP
