// Recording a timeline of what backplane does, for ui.perfetto.dev and
// chrome://tracing.
//
//   backplane::trace_start("out.json");
//   ... device_put, take_windows, loads ...
//   backplane::trace_stop();            // writes out.json
//
// The same without code: BACKPLANE_TRACE=out.json in the environment, or
// `trace = "out.json"` at the top level of the config file, starts recording
// when a Runtime first discovers its plugins; the file is written at
// trace_stop() or when the process exits. docs/tracing.md describes the file:
// its tracks, events and fields.
//
// Thread-safety: every function may be called from any thread. One trace is
// recorded at a time per process. While none is, every recording point in the
// library costs one relaxed atomic load.
#pragma once

#include <backplane/api.h>

#include <cstddef>
#include <filesystem>
#include <optional>

namespace backplane {

struct BACKPLANE_API TraceOptions {
  // The most events kept; when more are recorded the oldest are dropped and
  // the file says how many ("otherData": {"dropped_events": N}). An event
  // takes on the order of 100-200 bytes in memory.
  std::size_t capacity = std::size_t{1} << 20;
};

// Starts recording to `path`. The file is created (truncated) at once.
// Errors: Error(kIo) naming the path when it cannot be created;
// Error(kInvalidArgument) when a trace is already being recorded (the message
// names its file) or options.capacity is 0.
BACKPLANE_API void trace_start(const std::filesystem::path& path, const TraceOptions& options = {});

// Stops recording and writes the file. Returns its path, or nullopt when no
// trace was being recorded. Error(kIo) when the file cannot be written
// (recording has stopped nonetheless).
BACKPLANE_API std::optional<std::filesystem::path> trace_stop();

// The file of the trace being recorded, or nullopt.
BACKPLANE_API std::optional<std::filesystem::path> trace_active();

}  // namespace backplane
