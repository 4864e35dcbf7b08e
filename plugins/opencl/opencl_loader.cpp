// Dynamic binding to libOpenCL.so.1; see opencl_loader.hpp.
#include "opencl_loader.hpp"

#include <dlfcn.h>
#include <unistd.h>
#include <backplane/plugin_sdk/fork.hpp>
#include <backplane/plugin_support.hpp>

#include <atomic>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

namespace backplane::opencl {
namespace {

LoaderLoad open_loader(const std::string& library) {
  LoaderLoad load;
  // RTLD_LOCAL: the loader's symbols stay out of the global namespace.
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* text = dlerror();
    load.failure = "no OpenCL ICD loader: " + library + " not found (" +
                   (text != nullptr ? text : "no loader message") +
                   "); install one (Debian: ocl-icd-libopencl1) and a driver (pocl-opencl-icd, or the GPU vendor's)";
    return load;
  }
  auto api = std::make_unique<Api>();
  const char* missing = nullptr;
#define BP_OPENCL_RESOLVE_ENTRY(function)                                              \
  api->function = reinterpret_cast<decltype(api->function)>(dlsym(handle, #function)); \
  if (api->function == nullptr && missing == nullptr) missing = #function;
  BP_OPENCL_FUNCTIONS(BP_OPENCL_RESOLVE_ENTRY)
#undef BP_OPENCL_RESOLVE_ENTRY
  if (missing != nullptr) {
    load.failure = "OpenCL ICD loader " + library + " lacks " + missing + " (this plugin needs OpenCL 1.2 or newer)";
    dlclose(handle);
    return load;
  }
  load.api = api.release();  // owned by load_loader's table from here on
  return load;
}

plugin_sdk::ForkGuard fork_guard;  // noted once a platform has answered

}  // namespace

const LoaderLoad& load_loader(const std::string& library) noexcept {
  static std::mutex mutex;
  // Kept until the plugin is unloaded, which the core does only after
  // destroying its backends; a backend never destroyed is never called again
  // at exit (the SDK leaves it alone). The library handles stay open: the
  // driver's own threads may outlive the plugin.
  static std::map<std::string, LoaderLoad> table;
  static std::vector<std::unique_ptr<const Api>> apis;
  static auto* loads = &table;
  static LoaderLoad out_of_memory{nullptr, "no OpenCL ICD loader: out of host memory while opening it"};
  try {
    const std::lock_guard lock(mutex);
    auto found = loads->find(library);
    if (found == loads->end()) {
      found = loads->emplace(library, open_loader(library)).first;
      if (found->second.api != nullptr) apis.emplace_back(found->second.api);
    }
    return found->second;  // std::map nodes never move
  } catch (const std::exception&) {
    return out_of_memory;
  }
}

std::string error_name(cl_int code) {
  switch (code) {
#define BP_OPENCL_ERROR(name) \
  case name: return #name;
    BP_OPENCL_ERROR(CL_SUCCESS)
    BP_OPENCL_ERROR(CL_DEVICE_NOT_FOUND)
    BP_OPENCL_ERROR(CL_DEVICE_NOT_AVAILABLE)
    BP_OPENCL_ERROR(CL_COMPILER_NOT_AVAILABLE)
    BP_OPENCL_ERROR(CL_MEM_OBJECT_ALLOCATION_FAILURE)
    BP_OPENCL_ERROR(CL_OUT_OF_RESOURCES)
    BP_OPENCL_ERROR(CL_OUT_OF_HOST_MEMORY)
    BP_OPENCL_ERROR(CL_PROFILING_INFO_NOT_AVAILABLE)
    BP_OPENCL_ERROR(CL_MEM_COPY_OVERLAP)
    BP_OPENCL_ERROR(CL_IMAGE_FORMAT_MISMATCH)
    BP_OPENCL_ERROR(CL_IMAGE_FORMAT_NOT_SUPPORTED)
    BP_OPENCL_ERROR(CL_BUILD_PROGRAM_FAILURE)
    BP_OPENCL_ERROR(CL_MAP_FAILURE)
    BP_OPENCL_ERROR(CL_MISALIGNED_SUB_BUFFER_OFFSET)
    BP_OPENCL_ERROR(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)
    BP_OPENCL_ERROR(CL_COMPILE_PROGRAM_FAILURE)
    BP_OPENCL_ERROR(CL_LINKER_NOT_AVAILABLE)
    BP_OPENCL_ERROR(CL_LINK_PROGRAM_FAILURE)
    BP_OPENCL_ERROR(CL_DEVICE_PARTITION_FAILED)
    BP_OPENCL_ERROR(CL_KERNEL_ARG_INFO_NOT_AVAILABLE)
    BP_OPENCL_ERROR(CL_INVALID_VALUE)
    BP_OPENCL_ERROR(CL_INVALID_DEVICE_TYPE)
    BP_OPENCL_ERROR(CL_INVALID_PLATFORM)
    BP_OPENCL_ERROR(CL_INVALID_DEVICE)
    BP_OPENCL_ERROR(CL_INVALID_CONTEXT)
    BP_OPENCL_ERROR(CL_INVALID_QUEUE_PROPERTIES)
    BP_OPENCL_ERROR(CL_INVALID_COMMAND_QUEUE)
    BP_OPENCL_ERROR(CL_INVALID_HOST_PTR)
    BP_OPENCL_ERROR(CL_INVALID_MEM_OBJECT)
    BP_OPENCL_ERROR(CL_INVALID_IMAGE_FORMAT_DESCRIPTOR)
    BP_OPENCL_ERROR(CL_INVALID_IMAGE_SIZE)
    BP_OPENCL_ERROR(CL_INVALID_SAMPLER)
    BP_OPENCL_ERROR(CL_INVALID_BINARY)
    BP_OPENCL_ERROR(CL_INVALID_BUILD_OPTIONS)
    BP_OPENCL_ERROR(CL_INVALID_PROGRAM)
    BP_OPENCL_ERROR(CL_INVALID_PROGRAM_EXECUTABLE)
    BP_OPENCL_ERROR(CL_INVALID_KERNEL_NAME)
    BP_OPENCL_ERROR(CL_INVALID_KERNEL_DEFINITION)
    BP_OPENCL_ERROR(CL_INVALID_KERNEL)
    BP_OPENCL_ERROR(CL_INVALID_ARG_INDEX)
    BP_OPENCL_ERROR(CL_INVALID_ARG_VALUE)
    BP_OPENCL_ERROR(CL_INVALID_ARG_SIZE)
    BP_OPENCL_ERROR(CL_INVALID_KERNEL_ARGS)
    BP_OPENCL_ERROR(CL_INVALID_WORK_DIMENSION)
    BP_OPENCL_ERROR(CL_INVALID_WORK_GROUP_SIZE)
    BP_OPENCL_ERROR(CL_INVALID_WORK_ITEM_SIZE)
    BP_OPENCL_ERROR(CL_INVALID_GLOBAL_OFFSET)
    BP_OPENCL_ERROR(CL_INVALID_EVENT_WAIT_LIST)
    BP_OPENCL_ERROR(CL_INVALID_EVENT)
    BP_OPENCL_ERROR(CL_INVALID_OPERATION)
    BP_OPENCL_ERROR(CL_INVALID_GL_OBJECT)
    BP_OPENCL_ERROR(CL_INVALID_BUFFER_SIZE)
    BP_OPENCL_ERROR(CL_INVALID_MIP_LEVEL)
    BP_OPENCL_ERROR(CL_INVALID_GLOBAL_WORK_SIZE)
    BP_OPENCL_ERROR(CL_INVALID_PROPERTY)
    BP_OPENCL_ERROR(CL_INVALID_IMAGE_DESCRIPTOR)
    BP_OPENCL_ERROR(CL_INVALID_COMPILER_OPTIONS)
    BP_OPENCL_ERROR(CL_INVALID_LINKER_OPTIONS)
    BP_OPENCL_ERROR(CL_INVALID_DEVICE_PARTITION_COUNT)
#undef BP_OPENCL_ERROR
    case -1001: return "CL_PLATFORM_NOT_FOUND_KHR";  // cl_khr_icd: the loader found no driver
    default: return "OpenCL error " + std::to_string(code);
  }
}

BP_ErrorCode error_code_for(cl_int code) {
  switch (code) {
    case CL_MEM_OBJECT_ALLOCATION_FAILURE:
    case CL_OUT_OF_RESOURCES:
    case CL_OUT_OF_HOST_MEMORY: return BP_ERROR_OUT_OF_MEMORY;
    case CL_DEVICE_NOT_AVAILABLE:
    case CL_COMPILER_NOT_AVAILABLE: return BP_ERROR_UNAVAILABLE;
    default: return BP_ERROR_DEVICE;
  }
}

void check(cl_int code, std::string_view what, std::string_view note) {
  if (code == CL_SUCCESS) return;
  throw plugin_sdk::Failure(error_code_for(code),
                            std::string(what) + " failed: " + error_name(code) + std::string(note));
}

void note_initialised() noexcept { fork_guard.note_initialised(); }

bool forked() noexcept { return fork_guard.forked(); }

std::string forked_message() { return fork_guard.message("OpenCL", "OpenCL drivers do not survive fork", "opencl"); }

}  // namespace backplane::opencl
