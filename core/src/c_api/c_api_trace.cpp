// bp_trace_*: the C face of backplane/trace.hpp.
#include "c_api/c_api_support.hpp"

#include <backplane/trace.hpp>

#include <fmt/format.h>

using namespace backplane;
using backplane::c_api::guarded;

extern "C" {

bp_status bp_trace_start(const char* path, const bp_trace_options* options) {
  return guarded([&] {
    if (path == nullptr) throw Error(ErrorCode::kInvalidArgument, "bp_trace_start: path is NULL");
    TraceOptions trace_options;
    if (options != nullptr) {
      if (options->struct_size < sizeof(bp_trace_options)) {
        throw Error(ErrorCode::kInvalidArgument,
                    fmt::format("bp_trace_start: options->struct_size {} is smaller than {} (set it to sizeof)",
                                options->struct_size, sizeof(bp_trace_options)));
      }
      if (options->capacity != 0) trace_options.capacity = static_cast<std::size_t>(options->capacity);
    }
    trace_start(path, trace_options);
  });
}

bp_status bp_trace_stop(void) {
  return guarded([] { trace_stop(); });
}

}  // extern "C"
