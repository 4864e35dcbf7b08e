// Writes a recorded session as Chrome trace JSON:
//   {"traceEvents":[...], "displayTimeUnit":"ms", "otherData":{...}}
// Metadata events first (process and track names), then the events by time.
#include "trace/recorder.hpp"

#include "util/utf8.hpp"

#include <backplane/error.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <span>

namespace backplane::detail::trace {
namespace {

// Microseconds with three decimals: exact for nanosecond clocks.
void append_microseconds(std::string& out, std::int64_t nanoseconds) {
  const char* sign = nanoseconds < 0 ? "-" : "";
  const std::uint64_t magnitude = nanoseconds < 0 ? std::uint64_t{0} - static_cast<std::uint64_t>(nanoseconds)
                                                  : static_cast<std::uint64_t>(nanoseconds);
  fmt::format_to(std::back_inserter(out), "{}{}.{:03}", sign, magnitude / 1000, magnitude % 1000);
}

// `text` as the inside of a JSON string (without quotes): quotes,
// backslashes and control characters escaped, bytes that are not UTF-8
// replaced by U+FFFD.
void append_escaped_text(std::string& out, std::string_view text) {
  for (std::size_t index = 0; index < text.size();) {
    const auto byte = static_cast<unsigned char>(text[index]);
    if (byte < 0x80) {
      switch (byte) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        default:
          if (byte < 0x20) {
            fmt::format_to(std::back_inserter(out), "\\u{:04x}", byte);
          } else {
            out += static_cast<char>(byte);
          }
      }
      ++index;
      continue;
    }
    const auto sequence = decode_utf8(text, index);
    if (!sequence) {
      out += "\xEF\xBF\xBD";  // U+FFFD for a byte that is not UTF-8
      ++index;
    } else {
      out.append(text.substr(index, sequence->length));
      index += sequence->length;
    }
  }
}

void append_string(std::string& out, std::string_view text) {
  out += '"';
  append_escaped_text(out, text);
  out += '"';
}

void append_args(std::string& out, const Args& args) {
  out += "{";
  bool first = true;
  for (const Arg& arg : args) {
    if (!first) out += ',';
    first = false;
    append_string(out, arg.key);
    out += ':';
    if (const auto* integer = std::get_if<std::int64_t>(&arg.value)) {
      fmt::format_to(std::back_inserter(out), "{}", *integer);
    } else if (const auto* number = std::get_if<double>(&arg.value)) {
      if (std::isfinite(*number)) {
        fmt::format_to(std::back_inserter(out), "{}", *number);
      } else {
        out += "null";  // JSON has no infinities
      }
    } else {
      append_string(out, std::get<std::string>(arg.value));
    }
  }
  out += "}";
}

std::string process_name(std::int64_t pid) {
  std::string name = "process";
  if (std::FILE* comm = std::fopen("/proc/self/comm", "r")) {
    char text[64] = {};
    if (std::fgets(text, sizeof text, comm) != nullptr) {
      name = text;
      while (!name.empty() && (name.back() == '\n' || name.back() == '\r')) name.pop_back();
    }
    std::fclose(comm);
  }
  return fmt::format("backplane: {} ({})", name, pid);
}

// The file's text, buffered and handed to the atomic file a megabyte at a
// time.
class Output {
 public:
  explicit Output(AtomicFile& file) : file_(file) {}

  std::string& buffer() { return buffer_; }
  void flush_if_large() {
    if (buffer_.size() >= (std::size_t{1} << 20)) flush();
  }
  // Writes the rest and renames the file into place.
  void commit() {
    flush();
    file_.commit();
  }

 private:
  void flush() {
    file_.write(std::as_bytes(std::span(buffer_)));
    buffer_.clear();
  }

  AtomicFile& file_;
  std::string buffer_;
};

}  // namespace

void write_trace(AtomicFile& file, Collected collected) {
  std::vector<Event>& events = collected.events;
  std::stable_sort(events.begin(), events.end(),
                   [](const Event& left, const Event& right) { return left.begin_ns < right.begin_ns; });
  if (events.size() > collected.capacity) {
    const std::size_t excess = events.size() - collected.capacity;
    events.erase(events.begin(), events.begin() + static_cast<std::ptrdiff_t>(excess));
    collected.dropped += excess;
  }
  std::set<std::uint32_t> used;
  for (const Event& event : events) used.insert(event.track);

  Output output(file);
  std::string& out = output.buffer();
  const std::int64_t pid = collected.pid;
  out += "{\"traceEvents\":[\n";
  fmt::format_to(std::back_inserter(out),
                 "{{\"name\":\"{}\",\"cat\":\"{}\",\"ph\":\"M\",\"ts\":0,\"pid\":{},\"tid\":0,\"args\":{{\"name\":",
                 event::kProcessName, category::kMetadata, pid);
  append_string(out, process_name(pid));
  out += "}}";
  for (std::uint32_t track : used) {
    if (track == 0 || track > collected.track_names.size()) continue;
    fmt::format_to(std::back_inserter(out),
                   ",\n{{\"name\":\"{}\",\"cat\":\"{}\",\"ph\":\"M\",\"ts\":0,\"pid\":{},\"tid\":{},"
                   "\"args\":{{\"name\":",
                   event::kThreadName, category::kMetadata, pid, track);
    append_string(out, collected.track_names[track - 1]);
    out += "}}";
  }
  if (collected.dropped != 0) {
    const std::int64_t at = events.empty() ? 0 : events.front().begin_ns;
    fmt::format_to(std::back_inserter(out),
                   ",\n{{\"name\":\"{}\",\"cat\":\"{}\",\"ph\":\"i\",\"s\":\"g\",\"ts\":", event::kDroppedEvents,
                   category::kTrace);
    append_microseconds(out, at);
    fmt::format_to(std::back_inserter(out), ",\"pid\":{},\"tid\":0,\"args\":{{\"{}\":{},\"{}\":{}}}}}", pid,
                   arg::kDroppedEvents, collected.dropped, arg::kCapacity, collected.capacity);
  }
  for (const Event& event : events) {
    out += ",\n{\"name\":";
    append_string(out, event.name);
    out += ",\"cat\":";
    append_string(out, event.category);
    fmt::format_to(std::back_inserter(out), ",\"ph\":\"{}\",\"ts\":", event.phase);
    append_microseconds(out, event.begin_ns);
    if (event.phase == 'X') {
      out += ",\"dur\":";
      append_microseconds(out, event.duration_ns);
    } else if (event.phase == 'i') {
      out += ",\"s\":\"t\"";
    }
    fmt::format_to(std::back_inserter(out), ",\"pid\":{},\"tid\":{},\"args\":", pid, event.track);
    append_args(out, event.args);
    out += "}";
    output.flush_if_large();
  }
  fmt::format_to(
      std::back_inserter(out),
      "\n],\n\"displayTimeUnit\":\"ms\",\n\"otherData\":{{\"producer\":\"backplane {}\",\"{}\":{},\"{}\":{}}}}}\n",
      BACKPLANE_VERSION, arg::kDroppedEvents, collected.dropped, arg::kCapacity, collected.capacity);
  output.commit();
}

}  // namespace backplane::detail::trace
