// Dynamic binding to the NVIDIA driver API (libcuda.so.1).
//
// The plugin never links libcuda or its link stub: it opens libcuda.so.1 the
// first time a backend probes, so the plugin loads on machines without the
// driver and probe can say why the backend is unavailable. The driver itself
// applies CUDA_VISIBLE_DEVICES; we see only the devices it lets us see.
//
// Included only from .cu files (it includes cuda.h).
#ifndef BACKPLANE_PLUGINS_CUDA_CUDA_DRIVER_HPP
#define BACKPLANE_PLUGINS_CUDA_CUDA_DRIVER_HPP

#include <backplane/plugin.h>
#include <cuda.h>

#include <concepts>
#include <cstdint>
#include <string>

namespace backplane::cuda {

// The driver version this plugin needs: the major release of the toolkit it
// was built with (CUDA minor version compatibility covers later minors).
inline constexpr int kRequiredDriverVersion = (CUDA_VERSION / 1000) * 1000;

// Every driver entry point the plugin calls. cuda.h maps the plain names to
// their current ABI versions (cuMemAlloc -> cuMemAlloc_v2); the table uses the
// same macros, so `driver.cuMemAlloc` is the _v2 entry point, resolved by its
// versioned symbol name.
#define BP_CUDA_DRIVER_FUNCTIONS(X) \
  X(cuGetErrorName)                 \
  X(cuGetErrorString)               \
  X(cuDriverGetVersion)             \
  X(cuInit)                         \
  X(cuDeviceGetCount)               \
  X(cuDeviceGet)                    \
  X(cuDeviceGetName)                \
  X(cuDeviceTotalMem)               \
  X(cuDeviceGetAttribute)           \
  X(cuDeviceGetUuid)                \
  X(cuDeviceGetPCIBusId)            \
  X(cuDeviceCanAccessPeer)          \
  X(cuDevicePrimaryCtxGetState)     \
  X(cuDevicePrimaryCtxRetain)       \
  X(cuDevicePrimaryCtxRelease)      \
  X(cuCtxPushCurrent)               \
  X(cuCtxPopCurrent)                \
  X(cuCtxEnablePeerAccess)          \
  X(cuMemGetInfo)                   \
  X(cuMemAlloc)                     \
  X(cuMemFree)                      \
  X(cuMemHostAlloc)                 \
  X(cuMemFreeHost)                  \
  X(cuPointerGetAttribute)          \
  X(cuMemcpyAsync)                  \
  X(cuMemcpyPeerAsync)              \
  X(cuStreamCreate)                 \
  X(cuStreamDestroy)                \
  X(cuStreamSynchronize)            \
  X(cuStreamWaitEvent)              \
  X(cuEventCreate)                  \
  X(cuEventRecord)                  \
  X(cuEventSynchronize)             \
  X(cuEventQuery)                   \
  X(cuEventElapsedTime)             \
  X(cuEventDestroy)

struct DriverApi {
#define BP_CUDA_DECLARE_ENTRY(function) decltype(&::function) function = nullptr;
  BP_CUDA_DRIVER_FUNCTIONS(BP_CUDA_DECLARE_ENTRY)
#undef BP_CUDA_DECLARE_ENTRY
};

// The outcome of opening the driver, decided once per process.
struct DriverLoad {
  const DriverApi* api = nullptr;  // non-NULL when every entry point resolved
  int version = 0;                 // cuDriverGetVersion, 0 when unknown
  // Why `api` is NULL, ready to be a probe reason:
  //   "no NVIDIA driver: libcuda.so.1 not found (<dlerror>)"
  //   "NVIDIA driver too old: it supports CUDA 12.2, this plugin needs CUDA 13.0 or newer"
  std::string failure;
};

// Opens libcuda.so.1 and resolves the table the first time it is called;
// later calls return the same result. Thread-safe, never throws. A driver
// that was opened successfully stays loaded until the process exits (device
// contexts may outlive any one backend).
const DriverLoad& load_driver() noexcept;

// Fork: a CUDA context does not survive fork(); a child must not call the
// driver that its parent initialised (it fails or hangs there). run_probe
// records the process whose cuInit succeeded; in any other process (a child)
// the backend refuses every call that needs the driver, with
// forked_driver_message().
void note_driver_initialised() noexcept;
// True in a child of the process that initialised the driver.
bool driver_forked() noexcept;
// "CUDA was initialised in process 1234 before fork(); a CUDA context does not
// survive fork: use the cuda backend only in the parent, or start workers with
// the 'spawn' method".
std::string forked_driver_message();

// "CUDA_ERROR_OUT_OF_MEMORY: out of memory" (or a numeric fallback).
std::string describe_result(const DriverApi& driver, CUresult result);

// "13.0" for 13000.
std::string format_cuda_version(int version);

// The one place CUDA results become ABI error codes.
BP_ErrorCode error_code_for(CUresult result);

// Throws backplane::plugin_sdk::Failure for a failed driver call, with the message
// "<what> failed: CUDA_ERROR_X: text<note>". Does nothing on CUDA_SUCCESS.
void check(const DriverApi& driver, CUresult result, const std::string& what, const std::string& note = "");

// The same for a call on the hot path (a copy, an event): `what` is a
// callable that builds the message, run only when the call failed, so that
// success formats nothing.
template <class What>
requires std::invocable<What&>
void check(const DriverApi& driver, CUresult result, What&& what) {
  if (result != CUDA_SUCCESS) [[unlikely]]
    check(driver, result, std::string(what()));
}

}  // namespace backplane::cuda

#endif  // BACKPLANE_PLUGINS_CUDA_CUDA_DRIVER_HPP
