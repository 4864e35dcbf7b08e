#include "trace_reader.hpp"

#include <backplane/error.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <vector>

namespace backplane::tools {
namespace {

namespace category = detail::trace::category;
namespace event = detail::trace::event;
namespace arg = detail::trace::arg;
using json = nlohmann::json;

// What a container of the file is to the summary.
enum class Role {
  kRoot,         // the top-level object: {"traceEvents": [...], "otherData": {...}}
  kTraceEvents,  // the array of events (or the whole file, in the array form)
  kEvent,        // one event
  kArgs,         // an event's "args"
  kOtherData,    // the top-level "otherData"
  kIgnored,      // anything else: only its nesting is counted
};

struct Frame {
  Role role;
  bool object;
  std::string key;        // in an object: the key of the value being read
  std::size_t index = 0;  // in an array: the index of the value being read
};

// The fields of one event that the summary reads.
struct EventFields {
  std::string phase, category, name, device, target, stream;
  double begin = 0, duration = 0;
  std::uint64_t bytes = 0;
};

std::uint64_t to_bytes(double value) {
  // Beyond 2^64 (or NaN) a byte count means nothing: it counts as none.
  return value > 0 && value < 18446744073709551616.0 ? static_cast<std::uint64_t>(value) : 0;
}

// Chooses where each parse event goes. Every callback returns false to stop
// the parse at the first problem, whose message `failure` then holds.
class SummaryReader final : public nlohmann::json_sax<json> {
 public:
  explicit SummaryReader(TraceSummary& summary) : summary_(summary) { stack_.reserve(kMaxTraceNesting); }

  std::optional<std::string> failure;
  bool saw_events = false;
  bool root_object = false;

  bool null() override { return scalar("null"); }
  bool boolean(bool) override { return scalar("a boolean"); }
  bool number_integer(number_integer_t value) override {
    if (into(Role::kArgs, arg::kStream)) {
      fields_.stream = std::to_string(value);
      return advance();
    }
    return number(static_cast<double>(value), value < 0);
  }
  bool number_unsigned(number_unsigned_t value) override {
    if (into(Role::kArgs, arg::kStream)) {
      fields_.stream = std::to_string(value);
      return advance();
    }
    if (into(Role::kOtherData, arg::kDroppedEvents)) {
      summary_.dropped = value;
      return advance();
    }
    if (into(Role::kArgs, arg::kBytes)) {
      fields_.bytes = value;
      return advance();
    }
    return number(static_cast<double>(value), false);
  }
  bool number_float(number_float_t value, const string_t& text) override {
    if (into(Role::kOtherData, arg::kDroppedEvents)) {
      if (!(value >= 0 && value == std::floor(value) && value < 18446744073709551616.0)) {
        return fail(fmt::format("{} is {}, not a count of events", place(), text));
      }
      summary_.dropped = static_cast<std::uint64_t>(value);
      return advance();
    }
    return number(value, value < 0);
  }
  bool string(string_t& value) override {
    if (stack_.empty()) return fail("the file is a JSON string, not a trace");
    const Frame& top = stack_.back();
    if (top.role == Role::kEvent) {
      if (top.key == "ph") fields_.phase = std::move(value);
      if (top.key == "cat") fields_.category = std::move(value);
      if (top.key == "name") fields_.name = std::move(value);
      if (top.key == "ts" || top.key == "dur") return fail(fmt::format("{} is a string, not a number", place()));
    } else if (top.role == Role::kArgs) {
      if (top.key == arg::kDevice) fields_.device = std::move(value);
      if (top.key == arg::kTarget) fields_.target = std::move(value);
      if (top.key == arg::kStream) fields_.stream = std::move(value);
    } else if (top.role == Role::kRoot && top.key == "traceEvents") {
      return fail("'traceEvents' is a string, not an array");
    } else if (top.role == Role::kOtherData && top.key == arg::kDroppedEvents) {
      return fail(fmt::format("{} is a string, not a count of events", place()));
    }
    return advance();
  }
  bool binary(binary_t&) override { return advance(); }

  bool start_object(std::size_t) override { return open(true); }
  bool key(string_t& name) override {
    stack_.back().key = std::move(name);
    return true;
  }
  bool end_object() override {
    const Role role = stack_.back().role;
    stack_.pop_back();
    if (role == Role::kEvent && !add_event()) return false;
    return stack_.empty() || advance();
  }
  bool start_array(std::size_t) override { return open(false); }
  bool end_array() override {
    stack_.pop_back();
    return stack_.empty() || advance();
  }

  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& error) override {
    // The library's message names the offending token; the offset says
    // where, so its own "[json.exception...] parse error at line L, column
    // C: " goes.
    std::string what = error.what();
    if (const auto tag = what.find("] "); what.starts_with("[json.exception") && tag != std::string::npos) {
      what.erase(0, tag + 2);
    }
    if (const auto colon = what.find(": "); what.starts_with("parse error") && colon != std::string::npos) {
      what.erase(0, colon + 2);
    }
    return fail(fmt::format("not valid JSON at byte {}: {}", position, what));
  }

 private:
  bool fail(std::string message) {
    if (!failure) failure = std::move(message);
    return false;
  }

  // True when the value being read is `key` of a container of `role`.
  bool into(Role role, std::string_view key) const {
    return !stack_.empty() && stack_.back().role == role && stack_.back().object && stack_.back().key == key;
  }

  // Where the value being read lies: "traceEvents[3].args.bytes"; past a few
  // levels, elided.
  std::string place() const {
    constexpr std::size_t kShown = 6;
    std::string out;
    for (std::size_t depth = 0; depth < stack_.size(); ++depth) {
      if (depth == kShown) {
        out += fmt::format("... ({} levels)", stack_.size());
        break;
      }
      const Frame& frame = stack_[depth];
      if (frame.object) {
        if (!out.empty()) out += '.';
        out += frame.key.size() <= 64 ? frame.key : frame.key.substr(0, 64) + "...";
      } else {
        out += fmt::format("[{}]", frame.index);
      }
    }
    return out.empty() ? std::string("the top level") : out;
  }

  // After a value: the next element of an array.
  bool advance() {
    if (!stack_.empty() && !stack_.back().object) ++stack_.back().index;
    return true;
  }

  bool scalar(std::string_view what) {
    if (stack_.empty()) return fail(fmt::format("the file is {}, not a trace", what));
    if (into(Role::kRoot, "traceEvents")) return fail(fmt::format("'traceEvents' is {}, not an array", what));
    if (into(Role::kOtherData, arg::kDroppedEvents)) {
      return fail(fmt::format("{} is {}, not a count of events", place(), what));
    }
    if (into(Role::kEvent, "ts") || into(Role::kEvent, "dur")) {
      return fail(fmt::format("{} is {}, not a number", place(), what));
    }
    if (into(Role::kEvent, "ph") || into(Role::kEvent, "cat") || into(Role::kEvent, "name")) {
      return fail(fmt::format("{} is {}, not a string", place(), what));
    }
    return advance();
  }

  bool number(double value, bool negative) {
    if (stack_.empty()) return fail("the file is a JSON number, not a trace");
    const Frame& top = stack_.back();
    if (top.role == Role::kEvent && top.object) {
      if (top.key == "ts") fields_.begin = value;
      if (top.key == "dur") fields_.duration = value;
      if (top.key == "ph" || top.key == "cat" || top.key == "name") {
        return fail(fmt::format("{} is a number, not a string", place()));
      }
    } else if (top.role == Role::kArgs && top.object) {
      if (top.key == arg::kBytes) fields_.bytes = to_bytes(value);
      if (top.key == arg::kStream) fields_.stream = fmt::format("{}", value);
    } else if (top.role == Role::kOtherData && top.key == arg::kDroppedEvents && negative) {
      return fail(fmt::format("{} is {}, not a count of events", place(), value));
    } else if (top.role == Role::kRoot && top.key == "traceEvents") {
      return fail("'traceEvents' is a number, not an array");
    }
    return advance();
  }

  bool open(bool object) {
    if (stack_.size() == kMaxTraceNesting) {
      return fail(fmt::format("{}: nested more than {} levels deep", place(), kMaxTraceNesting));
    }
    Role role = Role::kIgnored;
    if (stack_.empty()) {
      role = object ? Role::kRoot : Role::kTraceEvents;
      root_object = object;
      saw_events = saw_events || !object;
    } else {
      const Frame& parent = stack_.back();
      if (parent.role == Role::kRoot && parent.key == "traceEvents") {
        if (object) return fail("'traceEvents' is an object, not an array");
        role = Role::kTraceEvents;
        saw_events = true;
      } else if (parent.role == Role::kRoot && parent.key == "otherData" && object) {
        role = Role::kOtherData;
      } else if (parent.role == Role::kTraceEvents && object) {
        role = Role::kEvent;
        fields_ = EventFields{};
      } else if (parent.role == Role::kEvent && parent.key == "args" && object) {
        role = Role::kArgs;
      } else if (parent.role == Role::kEvent && (parent.key == "ts" || parent.key == "dur")) {
        return fail(fmt::format("{} is {}, not a number", place(), object ? "an object" : "an array"));
      } else if (parent.role == Role::kOtherData && parent.key == arg::kDroppedEvents) {
        return fail(fmt::format("{} is {}, not a count of events", place(), object ? "an object" : "an array"));
      }
    }
    stack_.push_back(Frame{role, object, {}, 0});
    return true;
  }

  template <class Map>
  bool within_limit(const Map& groups, const std::string& key, const char* what) {
    if (groups.size() < kMaxTraceGroups || groups.contains(key)) return true;
    return fail(fmt::format("more than {} distinct {} (at {})", kMaxTraceGroups, what, place()));
  }

  static void add(TraceTotals& totals, const EventFields& fields) {
    ++totals.events;
    totals.microseconds += fields.duration;
    totals.bytes += fields.bytes;
  }

  static void add_stream_event(StreamTotals& stream, const EventFields& fields) {
    add(stream.by_name[fields.name], fields);
    if (fields.name == event::kStep) {
      stream.first_step = std::min(stream.first_step, fields.begin);
      stream.last_step_end = std::max(stream.last_step_end, fields.begin + fields.duration);
    }
  }

  // At the end of an event object: its figures into the summary.
  bool add_event() {
    const EventFields& fields = fields_;
    if (fields.phase != "X") return true;
    if (fields.category == category::kBatchStream) {
      add_stream_event(summary_.batch_stream, fields);
      if (!fields.stream.empty()) {
        if (!within_limit(summary_.streams, fields.stream, "batch streams")) return false;
        add_stream_event(summary_.streams[fields.stream], fields);
      }
      return true;
    }
    if (std::find(std::begin(kDeviceCategories), std::end(kDeviceCategories), fields.category) ==
        std::end(kDeviceCategories)) {
      return true;
    }
    std::string device = !fields.device.empty() ? fields.device : !fields.target.empty() ? fields.target : "host";
    if (!within_limit(summary_.devices, device, "devices")) return false;
    add(summary_.devices[device][fields.category], fields);
    return true;
  }

  TraceSummary& summary_;
  std::vector<Frame> stack_;
  EventFields fields_;
};

}  // namespace

std::optional<double> StreamTotals::data_stall_fraction() const {
  const auto wait = by_name.find(std::string(event::kWait));
  if (wait == by_name.end() || !(last_step_end > first_step)) return std::nullopt;
  return wait->second.microseconds / (last_step_end - first_step);
}

TraceSummary read_trace_summary(std::istream& in) {
  TraceSummary summary;
  SummaryReader reader(summary);
  const bool parsed = json::sax_parse(in, &reader);
  if (!parsed || reader.failure) {
    throw Error(ErrorCode::kInvalidFile, reader.failure.value_or("not valid JSON"));
  }
  if (!reader.saw_events) throw Error(ErrorCode::kInvalidFile, "no 'traceEvents' array");
  return summary;
}

}  // namespace backplane::tools
