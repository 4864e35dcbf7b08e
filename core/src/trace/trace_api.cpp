// The public trace_start / trace_stop (backplane/trace.hpp) over the recorder.
#include "trace/trace.hpp"

#include <backplane/trace.hpp>

namespace backplane {

void trace_start(const std::filesystem::path& path, const TraceOptions& options) {
  detail::trace::start(path, options.capacity);
}

std::optional<std::filesystem::path> trace_stop() { return detail::trace::stop(); }

std::optional<std::filesystem::path> trace_active() { return detail::trace::active_path(); }

}  // namespace backplane
