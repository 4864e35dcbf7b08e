// bp_trace_*: the C face of backplane/trace.hpp.
#include "c_api/c_api_support.hpp"

#include <backplane/trace.hpp>

// The C functions below have C linkage and global scope; they call the
// C++ API and the C API's helpers by their short names.
using namespace ::backplane;
using namespace ::backplane::c_api;

static_assert(BP_TRACE_DEFAULT_CAPACITY == ::backplane::kDefaultTraceCapacity);

extern "C" {

bp_status bp_trace_start(const char* path, const bp_trace_options* options) {
  return guarded([&] {
    if (path == nullptr) throw Error(ErrorCode::kInvalidArgument, "bp_trace_start: path is NULL");
    TraceOptions trace_options;
    if (options != nullptr) {
      require_struct_size(options->struct_size, sizeof(bp_trace_options), "bp_trace_start", "options");
      trace_options.capacity = static_cast<std::size_t>(options->capacity);  // 0 is the default on both faces
    }
    trace_start(path, trace_options);
  });
}

bp_status bp_trace_stop(void) {
  return guarded([] { trace_stop(); });
}

}  // extern "C"
