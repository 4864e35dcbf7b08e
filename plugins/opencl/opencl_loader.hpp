// Dynamic binding to the OpenCL ICD loader (libOpenCL.so.1).
//
// The plugin never links libOpenCL: it opens the loader the first time a
// backend probes, so the plugin loads on machines without OpenCL and probe
// can say why the backend is unavailable. The loader finds the installed
// drivers (ICDs) through the .icd files in /etc/OpenCL/vendors, or in the
// directory OCL_ICD_VENDORS names.
#ifndef BACKPLANE_PLUGINS_OPENCL_OPENCL_LOADER_HPP
#define BACKPLANE_PLUGINS_OPENCL_OPENCL_LOADER_HPP

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 300
#endif
#ifndef CL_USE_DEPRECATED_OPENCL_1_2_APIS
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS  // clCreateCommandQueue: every loader has it
#endif
#include <CL/cl.h>

#include <backplane/plugin.h>

#include <concepts>
#include <string>
#include <string_view>

namespace backplane::opencl {

// The loader's file name, opened with the dynamic linker's search rules.
inline constexpr char kLoaderLibrary[] = "libOpenCL.so.1";

// Every OpenCL entry point the plugin calls; all are OpenCL 1.2 or older.
#define BP_OPENCL_FUNCTIONS(X)   \
  X(clGetPlatformIDs)            \
  X(clGetPlatformInfo)           \
  X(clGetDeviceIDs)              \
  X(clGetDeviceInfo)             \
  X(clCreateContext)             \
  X(clReleaseContext)            \
  X(clCreateCommandQueue)        \
  X(clReleaseCommandQueue)       \
  X(clFlush)                     \
  X(clFinish)                    \
  X(clCreateBuffer)              \
  X(clReleaseMemObject)          \
  X(clEnqueueWriteBuffer)        \
  X(clEnqueueReadBuffer)         \
  X(clEnqueueCopyBuffer)         \
  X(clEnqueueMapBuffer)          \
  X(clEnqueueUnmapMemObject)     \
  X(clWaitForEvents)             \
  X(clGetEventInfo)              \
  X(clGetEventProfilingInfo)     \
  X(clEnqueueMarkerWithWaitList) \
  X(clReleaseEvent)              \
  X(clCreateProgramWithSource)   \
  X(clBuildProgram)              \
  X(clGetProgramBuildInfo)       \
  X(clReleaseProgram)            \
  X(clCreateKernel)              \
  X(clReleaseKernel)             \
  X(clSetKernelArg)              \
  X(clEnqueueNDRangeKernel)

struct Api {
#define BP_OPENCL_DECLARE_ENTRY(function) decltype(&::function) function = nullptr;
  BP_OPENCL_FUNCTIONS(BP_OPENCL_DECLARE_ENTRY)
#undef BP_OPENCL_DECLARE_ENTRY
};

// The outcome of opening a loader, decided once per library path and process.
struct LoaderLoad {
  const Api* api = nullptr;  // non-NULL when every entry point resolved
  // Why `api` is NULL, ready to be a probe reason:
  //   "no OpenCL ICD loader: libOpenCL.so.1 not found (<dlerror>)"
  //   "OpenCL ICD loader libOpenCL.so.1 lacks clEnqueueMapBuffer"
  std::string failure;
};

// Opens `library` (kLoaderLibrary, or the backend's `library` option) and
// resolves the table, once per path; later calls return the same result.
// Thread-safe, never throws. A loader that opened stays loaded until the
// process exits (drivers keep threads and state in it).
const LoaderLoad& load_loader(const std::string& library) noexcept;

// "CL_MEM_OBJECT_ALLOCATION_FAILURE", or "OpenCL error -9999" for a code
// this plugin does not know.
std::string error_name(cl_int code);

// The one place OpenCL errors become ABI error codes.
BP_ErrorCode error_code_for(cl_int code);

// Throws backplane::plugin_sdk::Failure "<what> failed: CL_X<note>" for a failed
// call. Does nothing on CL_SUCCESS.
void check(cl_int code, std::string_view what, std::string_view note = {});

// The same for a call on the hot path (a copy, an event): `what` is a
// callable that builds the message, run only when the call failed, so that
// success formats nothing.
template <class What>
requires std::invocable<What&>
void check(cl_int code, What&& what) {
  if (code != CL_SUCCESS) [[unlikely]]
    check(code, std::string_view(std::string(what())));
}

// Fork: an OpenCL driver's state (PoCL's worker threads, a GPU driver's
// contexts) does not survive fork(). The probe records the process in which
// the loader first answered with platforms; in any other process (a child)
// the backend's refusal() hook refuses every call, with forked_message().
void note_initialised() noexcept;
bool forked() noexcept;
// "OpenCL was initialised in process 1234 before fork(); OpenCL drivers do not
// survive fork: use the opencl backend only in the parent, or start workers
// with the 'spawn' method".
std::string forked_message();

}  // namespace backplane::opencl

#endif  // BACKPLANE_PLUGINS_OPENCL_OPENCL_LOADER_HPP
