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
// File names: %p (the process id), %r (the launcher's local rank: LOCAL_RANK,
// OMPI_COMM_WORLD_LOCAL_RANK or SLURM_LOCALID, 0 when none is set), %h (the
// host name) and %% (a %) give each process of a job its own file
// ("trace-%r.json"). The path is made absolute when recording starts. The
// file is written as safetensors saves are: into a new file beside it,
// renamed into place when whole, so a reader sees the old file or the whole
// new trace; symlinks are followed under the kernel's protected_symlinks
// rule, and what is not a regular file (a FIFO) is refused.
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

// The events kept when TraceOptions::capacity is 0 (bp_trace_options and
// Python's trace() have the same default, BP_TRACE_DEFAULT_CAPACITY).
inline constexpr std::size_t kDefaultTraceCapacity = std::size_t{1} << 20;

struct BACKPLANE_API TraceOptions {
  // The most events kept, 0 meaning kDefaultTraceCapacity; when more are
  // recorded the oldest are dropped and the file says how many
  // ("otherData": {"dropped_events": N}). An event takes on the order of
  // 100-200 bytes in memory.
  std::size_t capacity = 0;
};

// Starts recording to the file `path` names (see File names above). A
// temporary file is created beside it at once; the trace replaces `path`
// when written.
// Errors: Error(kIo) naming the path when it cannot be created there;
// Error(kInvalidArgument) when a trace is already being recorded (the message
// names its file), or `path` is empty, holds a NUL byte or an unknown
// %-sequence, names what is not a regular file, or leads through a symlink
// the protected_symlinks rule does not let the caller follow.
BACKPLANE_API void trace_start(const std::filesystem::path& path, const TraceOptions& options = {});

// Stops recording and writes the file. Returns its path (absolute, %-sequences
// expanded), or nullopt when no trace was being recorded. Error(kIo) when the
// file cannot be written (recording has stopped nonetheless). A trace_start
// meanwhile waits until the file is written.
BACKPLANE_API std::optional<std::filesystem::path> trace_stop();

// The file of the trace being recorded (as trace_stop returns it), or nullopt.
BACKPLANE_API std::optional<std::filesystem::path> trace_active();

}  // namespace backplane
