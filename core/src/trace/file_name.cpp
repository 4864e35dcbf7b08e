// Trace file names: the %-sequences that give each process of a job its own
// file (docs/tracing.md, "File names"), and the path made absolute when
// recording starts.
#include "trace/recorder.hpp"
#include "util/environment.hpp"
#include "util/local_rank.hpp"

#include <backplane/error.hpp>

#include <fmt/format.h>

#include <unistd.h>

#include <climits>

namespace backplane::detail::trace {

std::string printable_path(const std::filesystem::path& path) {
  std::string out;
  for (const char c : path.native()) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7F) {
      out += fmt::format("\\x{:02x}", byte);
    } else {
      out += c;
    }
  }
  return out;
}

std::filesystem::path expand_trace_path(const std::filesystem::path& pattern, const PathValues& values) {
  const std::string& text = pattern.native();
  const auto refuse = [&](const std::string& why) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("trace_start: the path '{}' {}", printable_path(pattern), why));
  };
  if (text.empty()) throw Error(ErrorCode::kInvalidArgument, "trace_start: the path is empty");
  if (text.find('\0') != std::string::npos) refuse("holds a NUL byte");
  std::string expanded;
  for (std::size_t index = 0; index < text.size(); ++index) {
    if (text[index] != '%') {
      expanded += text[index];
      continue;
    }
    if (index + 1 == text.size()) refuse("ends with a lone '%' (write %% for a %)");
    switch (text[++index]) {
      case 'p': expanded += std::to_string(values.pid); break;
      case 'r': expanded += values.rank; break;
      case 'h': expanded += values.host; break;
      case '%': expanded += '%'; break;
      default:
        refuse(fmt::format("holds '%{}', which is none of %p (pid), %r (local rank), %h (host name), %% (a %)",
                           printable_path(std::string(1, text[index]))));
    }
  }
  return expanded;
}

PathValues this_process_path_values() {
  PathValues values;
  values.pid = static_cast<long>(::getpid());
  const auto rank = local_rank(Environment::process(), "the local rank fills %r in the trace's file name");
  values.rank = rank ? std::to_string(rank->rank) : "0";
  char host[HOST_NAME_MAX + 1] = {};
  values.host = ::gethostname(host, sizeof host - 1) == 0 && host[0] != '\0' ? host : "localhost";
  return values;
}

std::filesystem::path resolve_trace_path(const std::filesystem::path& pattern) {
  // Only a pattern with a %-sequence needs the process's values (so a
  // malformed rank variable is an error only for such a name).
  const bool uses_values = pattern.native().find('%') != std::string::npos;
  const std::filesystem::path path =
      expand_trace_path(pattern, uses_values ? this_process_path_values() : PathValues{});
  std::error_code error;
  std::filesystem::path absolute = std::filesystem::absolute(path, error);
  if (error) {
    throw Error(ErrorCode::kIo, fmt::format("trace_start: cannot resolve {} against the current directory: {}",
                                            printable_path(path), error.message()));
  }
  return absolute;
}

}  // namespace backplane::detail::trace
