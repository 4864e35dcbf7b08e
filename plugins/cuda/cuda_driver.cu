// Dynamic binding to libcuda.so.1; see cuda_driver.hpp.
#include "cuda_driver.hpp"

#include <dlfcn.h>
#include <unistd.h>
#include <backplane/plugin_sdk/fork.hpp>
#include <backplane/plugin_support.hpp>

#include <atomic>
#include <exception>

#define BP_CUDA_STRINGIFY_(token) #token
// Expands the argument first, so cuda.h's version macros apply:
// BP_CUDA_STRINGIFY(cuMemAlloc) is "cuMemAlloc_v2".
#define BP_CUDA_STRINGIFY(token) BP_CUDA_STRINGIFY_(token)

namespace backplane::cuda {
namespace {

constexpr char kDriverLibrary[] = "libcuda.so.1";

std::string too_old_message(int version, const std::string& detail) {
  std::string message = "NVIDIA driver too old: it supports CUDA " + format_cuda_version(version) +
                        ", this plugin needs CUDA " + format_cuda_version(kRequiredDriverVersion) + " or newer";
  if (!detail.empty()) message += " (" + detail + ")";
  return message;
}

DriverLoad open_driver() {
  DriverLoad load;
  // RTLD_LOCAL: the driver's symbols stay out of the global namespace.
  void* library = dlopen(kDriverLibrary, RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* text = dlerror();
    load.failure = std::string("no NVIDIA driver: ") + kDriverLibrary + " not found (" +
                   (text != nullptr ? text : "no loader message") + ")";
    return load;
  }

  static DriverApi api;
  const char* missing = nullptr;
#define BP_CUDA_RESOLVE_ENTRY(function)                                                                 \
  api.function = reinterpret_cast<decltype(api.function)>(dlsym(library, BP_CUDA_STRINGIFY(function))); \
  if (api.function == nullptr && missing == nullptr) missing = BP_CUDA_STRINGIFY(function);
  BP_CUDA_DRIVER_FUNCTIONS(BP_CUDA_RESOLVE_ENTRY)
#undef BP_CUDA_RESOLVE_ENTRY

  if (api.cuDriverGetVersion != nullptr) {
    int version = 0;
    if (api.cuDriverGetVersion(&version) == CUDA_SUCCESS) load.version = version;
  }
  if (load.version != 0 && load.version < kRequiredDriverVersion) {
    load.failure = too_old_message(load.version, "");
  } else if (missing != nullptr) {
    load.failure = load.version != 0
                       ? too_old_message(load.version, std::string(kDriverLibrary) + " lacks " + missing)
                       : std::string("NVIDIA driver too old: ") + kDriverLibrary + " lacks " + missing +
                             ", this plugin needs CUDA " + format_cuda_version(kRequiredDriverVersion) + " or newer";
  }
  if (!load.failure.empty()) {
    dlclose(library);
    return load;
  }
  load.api = &api;  // the library handle is deliberately never closed
  return load;
}

}  // namespace

const DriverLoad& load_driver() noexcept {
  // A function-local static: initialised once, thread-safe. open_driver only
  // throws std::bad_alloc; then the driver is reported missing for good.
  static const DriverLoad load = []() noexcept {
    try {
      return open_driver();
    } catch (const std::exception&) {
      DriverLoad failed;
      failed.failure = "no NVIDIA driver: out of host memory while opening libcuda.so.1";
      return failed;
    }
  }();
  return load;
}

namespace {
plugin_sdk::ForkGuard fork_guard;
}  // namespace

void note_driver_initialised() noexcept { fork_guard.note_initialised(); }

bool driver_forked() noexcept { return fork_guard.forked(); }

std::string forked_driver_message() {
  return fork_guard.message("CUDA", "a CUDA context does not survive fork", "cuda");
}

std::string describe_result(const DriverApi& driver, CUresult result) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (driver.cuGetErrorName(result, &name) != CUDA_SUCCESS || name == nullptr) {
    return "CUDA error " + std::to_string(static_cast<int>(result));
  }
  if (driver.cuGetErrorString(result, &text) != CUDA_SUCCESS || text == nullptr) {
    return name;
  }
  return std::string(name) + ": " + text;
}

std::string format_cuda_version(int version) {
  return std::to_string(version / 1000) + "." + std::to_string((version % 1000) / 10);
}

BP_ErrorCode error_code_for(CUresult result) {
  switch (result) {
    case CUDA_ERROR_OUT_OF_MEMORY: return BP_ERROR_OUT_OF_MEMORY;
    case CUDA_ERROR_NOT_SUPPORTED: return BP_ERROR_UNSUPPORTED;
    default: return BP_ERROR_DEVICE;
  }
}

void check(const DriverApi& driver, CUresult result, const std::string& what, const std::string& note) {
  if (result == CUDA_SUCCESS) return;
  throw plugin_sdk::Failure(error_code_for(result), what + " failed: " + describe_result(driver, result) + note);
}

}  // namespace backplane::cuda
