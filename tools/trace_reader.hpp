// Reading a Chrome trace file (written by trace_start / BACKPLANE_TRACE, or
// any tool that writes the format) into the figures `backplane trace summary`
// prints. The file is read as a stream of parse events, one trace event at a
// time, so memory stays a small multiple of the largest event whatever the
// file's size; nothing of it is kept but the totals.
//
// Shared by tools/trace_command.cpp and the fuzz target trace_summary
// (tests/fuzz), which feeds it arbitrary bytes.
#pragma once

#include "trace/events.hpp"

#include <cstddef>
#include <cstdint>
#include <istream>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace backplane::tools {

// Containers nested deeper than this are refused ("args" of 100,000 levels
// would otherwise cost memory and time for nothing the summary reads).
inline constexpr std::size_t kMaxTraceNesting = 64;
// Distinct devices and distinct batch streams a summary holds at most.
inline constexpr std::size_t kMaxTraceGroups = 10000;

struct TraceTotals {
  std::uint64_t events = 0;
  double microseconds = 0;
  std::uint64_t bytes = 0;
};

// The batch_stream events of one stream, or of all of them.
struct StreamTotals {
  std::map<std::string, TraceTotals> by_name;  // "step", "wait", "gather", "transfer"
  double first_step = std::numeric_limits<double>::infinity();
  double last_step_end = -std::numeric_limits<double>::infinity();

  // wait time / the span from the first step's begin to the last step's end.
  std::optional<double> data_stall_fraction() const;
};

struct TraceSummary {
  std::map<std::string, std::map<std::string, TraceTotals>> devices;  // device -> category -> totals
  StreamTotals batch_stream;                                          // every batch_stream event
  std::map<std::string, StreamTotals> streams;                        // by args.stream, where given
  std::uint64_t dropped = 0;                                          // otherData.dropped_events
};

// The categories the per-device table reports, in its order; complete events
// of other categories are left out.
inline constexpr std::string_view kDeviceCategories[] = {
    detail::trace::category::kGather,       detail::trace::category::kHostToDevice,
    detail::trace::category::kDeviceToHost, detail::trace::category::kDeviceToDevice,
    detail::trace::category::kWidening,     detail::trace::category::kAllocation,
    detail::trace::category::kStaging,      detail::trace::category::kFileRead};

// Reads `in` to its end. Throws Error(kInvalidFile) naming the place for what
// is not a trace: invalid JSON (with its byte offset), no "traceEvents" array,
// a field the summary reads of the wrong type ("traceEvents[3].ts is a
// string, not a number"), a negative or fractional otherData.dropped_events,
// nesting deeper than kMaxTraceNesting, or more than kMaxTraceGroups devices
// or streams.
TraceSummary read_trace_summary(std::istream& in);

}  // namespace backplane::tools
