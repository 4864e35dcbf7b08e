// The trace recorder: a timeline of what the core did, written as a Chrome
// trace (JSON) that ui.perfetto.dev and chrome://tracing open.
// docs/tracing.md describes the file for users; this header is the contract
// for the code that records into it.
//
// Recording
// ---------
//   if (trace::enabled()) { ... }              // one relaxed atomic load; inline
//   trace::Track lane = trace::track("sim:0 copies");
//   trace::complete(lane, "host_to_device", "device_put", begin, end,
//                   {{"bytes", size}, {"route", "staged"}});
//   trace::instant({}, "error", description, {{"message", what}});
//   trace::counter("memory sim:0", {{"in_use", in_use}, {"cached", cached}});
//
// Every recording function returns at once when no trace is recorded, so
// callers need not check enabled() first; they check it to skip building
// names and arguments, and reading the clock.
//
// Spans. A span of work is one complete event on the timeline and, where
// the core is built with NVTX (BACKPLANE_NVTX, on when the toolkit's nvtx3
// headers are found) and a tool such as Nsight Systems is attached, one NVTX
// range in the domain "backplane", whether or not a trace is recorded. Span
// begins both at construction and ends both together, so no recording point
// pairs them by hand:
//   trace::Span copy(category::kStaging, event::kCopy, size);
//   ...                                        // on any thread
//   copy.end(lane, {{"bytes", size}});          // the event [begin, now]; the range ends
// A span that nests on its thread (push/pop) is made by Span::nested:
//   auto read = trace::Span::nested(category::kFileRead, event::kRead);
//   read.arg({"bytes", n});                     // recorded when `read` goes out of scope
// enabled() is true with no trace recorded while an NVTX tool listens: the
// hooks run, recording() tells whether the Chrome trace wants the event. NVTX
// cannot back-date a range, so a span's range starts where the span is made,
// even when its event is given an earlier begin.
// Whether a tool is attached is decided once, by attach_tools(), when a
// runtime first discovers its plugins: NVTX's own initialisation (it loads
// the library NVTX_INJECTION64_PATH names) tells. Before that, and with no
// tool, no NVTX call is made and no range name is built.
//
// Tracks. A track is one row of the timeline (the event's "tid"). Perfetto
// does not draw complete events that overlap on one track, so:
//   - Track{} is the calling thread's own track ("thread NAME"), made when a
//     thread records for the first time. Work done synchronously on a thread
//     nests or follows, never overlaps, so it is safe there.
//   - track(name) is a named track, the same one for the same name. Use it for
//     work that is serialised by construction (one device queue).
//   - acquire_lane(base) / release_lane() hand out the tracks "BASE #0",
//     "BASE #1", ...: a lane is held by one piece of work at a time, so work
//     that overlaps (copies in flight on one device) lands on different lanes.
//     LaneHold does both.
//
// Threads. Each thread appends to its own buffer: it registers the buffer
// once under a lock, and every later append takes no lock (an atomic flag
// tells a concurrent stop() to wait for the append in progress). Named tracks
// and lanes take a lock: they are for the recording paths of whole transfers,
// not per-element work.
//
// Capacity. At most `capacity` events are kept (TraceOptions::capacity). A
// thread that records when the total is reached drops its own oldest event;
// at stop() the oldest events beyond the capacity are dropped across threads.
// The number dropped is written into the file ("otherData": {"dropped_events"}
// and an instant event "dropped events").
//
// Time: steady_clock, written as microseconds with three decimals since a
// process-wide origin, so traces written by one process line up.
//
// fork(): a child inherits the parent's session but never writes it (the file
// is the parent's) and records nothing into it; a trace the child starts
// begins empty (events recorded before the fork are the parent's).
#pragma once

#include "trace/events.hpp"

#include <atomic>
#include <chrono>
#include <concepts>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace backplane::detail::trace {

using Clock = std::chrono::steady_clock;

// Written only by start(), stop() and attach_tools(); read on every hook.
extern std::atomic<bool> g_enabled;    // recording() or an NVTX tool attached
extern std::atomic<bool> g_recording;  // a Chrome trace is recorded

#ifndef BACKPLANE_TRACE_HOOKS
#define BACKPLANE_TRACE_HOOKS 1
#endif

// A build configured with -Dtrace_hooks=false makes both of these a constant
// false, so that the recording points compile away and their cost can be
// measured against that build.
#if BACKPLANE_TRACE_HOOKS
// True while a trace is being recorded or an NVTX tool is attached: the hooks
// have someone to tell. One relaxed load.
inline bool enabled() noexcept { return g_enabled.load(std::memory_order_relaxed); }
// True while a trace is being recorded. One relaxed load.
inline bool recording() noexcept { return g_recording.load(std::memory_order_relaxed); }
#else
constexpr bool enabled() noexcept { return false; }
constexpr bool recording() noexcept { return false; }
#endif

// ---- NVTX (no-ops where the core is built without it)

// Decides, once per process, whether an NVTX tool is attached, and if so
// turns the hooks on for good. Thread-safe; cheap after the first call.
void attach_tools() noexcept;
// True when attach_tools() found an NVTX tool.
bool tools_attached() noexcept;
// NVTX calls in the "backplane" domain; the id 0 means "no range".
std::uint64_t nvtx_start(const std::string& name, std::uint64_t bytes) noexcept;
void nvtx_end(std::uint64_t id) noexcept;
void nvtx_push(const std::string& name) noexcept;
void nvtx_pop() noexcept;

// A row of the timeline; Track{} (id 0) is the calling thread's own track.
struct Track {
  std::uint32_t id = 0;
  friend bool operator==(Track, Track) = default;
};

// One argument of an event: a number or a text, written under "args".
struct Arg {
  template <std::integral Integer>
  Arg(std::string key_, Integer number) : key(std::move(key_)), value(static_cast<std::int64_t>(number)) {}
  template <std::floating_point Float>
  Arg(std::string key_, Float number) : key(std::move(key_)), value(static_cast<double>(number)) {}
  Arg(std::string key_, std::string text) : key(std::move(key_)), value(std::move(text)) {}
  Arg(std::string key_, std::string_view text) : key(std::move(key_)), value(std::string(text)) {}
  Arg(std::string key_, const char* text) : key(std::move(key_)), value(std::string(text)) {}

  std::string key;
  std::variant<std::int64_t, double, std::string> value;
};
using Args = std::vector<Arg>;

// The named track `name`: the same track for the same name, for the rest of
// the process. Returns Track{} when no trace is recorded. Takes a lock.
Track track(std::string_view name);

// A free lane "BASE #k": the lowest k not held whose last event ended by
// `begin` (the earliest time the holder will record), held until
// release_lane. Returns Track{} when no trace is recorded. Takes a lock.
Track acquire_lane(std::string_view base, Clock::time_point begin = Clock::now());
// Gives a lane back, ending its use now; Track{} is ignored. Record the
// holder's events before releasing.
void release_lane(Track lane) noexcept;
// As release_lane(lane), for a holder whose last event may end after now
// (device times, converted from another clock): the lane is free from the
// later of now and `until`.
void release_lane(Track lane, Clock::time_point until) noexcept;

// `time` as the file writes it: microseconds since the process's origin.
double timestamp_us(Clock::time_point time) noexcept;
// A CLOCK_MONOTONIC time in nanoseconds (what plugins' event_timing answers)
// as a trace time.
Clock::time_point from_monotonic_ns(std::int64_t nanoseconds) noexcept;

// A complete event ("ph":"X") from `begin` to `end` on `track`.
void complete(Track track, std::string_view category, std::string name, Clock::time_point begin, Clock::time_point end,
              Args args = {}) noexcept;
// An instant event ("ph":"i") now, on `track` (thread scope).
void instant(Track track, std::string_view category, std::string name, Args args = {}) noexcept;
// A counter sample ("ph":"C") now: each numeric arg is one series of the
// counter track `name` (text args are ignored by viewers).
void counter(std::string name, Args values) noexcept;

// Holds a lane from construction to destruction (see acquire_lane).
class LaneHold {
 public:
  LaneHold() = default;
  explicit LaneHold(std::string_view base, Clock::time_point begin = Clock::now())
      : lane_(recording() ? acquire_lane(base, begin) : Track{}) {}
  ~LaneHold() { release_lane(lane_); }
  LaneHold(LaneHold&& other) noexcept : lane_(std::exchange(other.lane_, Track{})) {}
  LaneHold& operator=(LaneHold&& other) noexcept {
    if (this != &other) {
      release_lane(lane_);
      lane_ = std::exchange(other.lane_, Track{});
    }
    return *this;
  }
  Track track() const { return lane_; }
  bool held() const { return lane_.id != 0; }

 private:
  Track lane_;
};

// One span of work: a complete event on the timeline and an NVTX range,
// begun at construction and ended together (see Spans above). Does nothing
// at all while the hooks are off. Movable, so a span begun on one call can
// end on another, on any thread (transfers, staging copies, batch stream
// steps); Span::nested ones are scopes, which end on the thread that made
// them, innermost first, at the latest when destroyed.
class Span {
 public:
  Span() = default;  // no span
  // A span from `begin` (the epoch: now) with a start/end NVTX range whose
  // payload is `bytes` (0: none).
  // `category` must outlive the span (events.hpp's constants do).
  Span(std::string_view category, std::string_view name, std::uint64_t bytes = 0, Clock::time_point begin = {}) noexcept
      : Span(category, name, bytes, begin, false) {}
  // A span from now with a push/pop NVTX range on the calling thread.
  static Span nested(std::string_view category, std::string_view name) noexcept {
    return Span(category, name, 0, {}, true);
  }
  // A nested span records its event here (it is a scope); one made by the
  // constructor and never ended records nothing (the work was abandoned).
  ~Span() { close(); }
  Span(Span&& other) noexcept { take(other); }
  // Closes this span as its destructor would, then takes `other`'s.
  Span& operator=(Span&& other) noexcept {
    if (this != &other) {
      close();
      take(other);
    }
    return *this;
  }

  // True while the event will be recorded: worth building args for.
  bool active() const noexcept { return recorded_; }
  // When the event begins (the epoch unless active()).
  Clock::time_point begin() const noexcept { return begin_; }
  // The category and name it was made with (empty while the hooks were off).
  std::string_view category() const noexcept { return category_; }
  const std::string& name() const noexcept { return name_; }
  // Adds an argument to the event (not to the range).
  void arg(Arg value) noexcept;
  // The event's name from now on (the range keeps the name it began with).
  void rename(std::string name) noexcept;
  // Ends the range and records the event from begin() to `end` (the epoch:
  // now; never before begin()) on `track`, with the args added before and
  // `args`. Later calls do nothing.
  void end(Track track = {}, Args args = {}, Clock::time_point end = {}) noexcept;
  // Ends the range and records no event.
  void discard() noexcept;

 private:
  Span(std::string_view category, std::string_view name, std::uint64_t bytes, Clock::time_point begin,
       bool nested) noexcept;
  void take(Span& other) noexcept;
  void end_range() noexcept;
  void close() noexcept;  // end() for a nested span, else discard()

  bool recorded_ = false;    // the Chrome event is pending
  bool pushed_ = false;      // a push/pop range is open on the thread that made it
  bool nested_ = false;      // made by nested()
  std::uint64_t range_ = 0;  // a start/end range is open (its NVTX id)
  std::string_view category_;
  std::string name_;
  Clock::time_point begin_;
  Args args_;
};

// ---- sessions (the public trace_start/trace_stop and the runtime call these)

// Starts recording to the file `pattern` names (expanded by
// expand_trace_path, resolved against the current directory now), written
// at stop() as saves are (atomic_file.hpp: a new file renamed into place,
// links followed under the protected_symlinks rule). A temporary file is
// made now, so a path that cannot be written is an error now. `capacity` is
// the most events kept, 0 meaning kDefaultTraceCapacity. Errors:
// Error(kInvalidArgument) when a trace is already being recorded (naming its
// file), the pattern is empty, holds a NUL byte or an unknown %-sequence, or
// names what is not a regular file; Error(kIo) / Error(kNotFound) when the
// file cannot be created there. Registers an atexit handler that writes the
// file if the process exits while recording. Thread-safe; waits for a stop()
// writing meanwhile.
void start(const std::filesystem::path& pattern, std::size_t capacity = 0);
// Stops recording and writes the file. Returns the path written, or nullopt
// when no trace was being recorded (also in a forked child, for the
// parent's trace). Error(kIo) when the file cannot be written (recording has
// stopped nonetheless). A start() meanwhile waits until the file is written.
std::optional<std::filesystem::path> stop();
// The file of the trace being recorded (absolute, expanded), if any.
std::optional<std::filesystem::path> active_path();

// The values of a trace path's %-sequences (docs/tracing.md, "File names").
struct PathValues {
  long pid = 0;
  std::string rank;  // the launcher's local rank, "0" when none is set
  std::string host;
};
// `pattern` with %p (pid), %r (local rank), %h (host name) and %% (a %)
// replaced. Error(kInvalidArgument) naming the pattern for another
// %-sequence, a % at its end, or a NUL byte in it.
std::filesystem::path expand_trace_path(const std::filesystem::path& pattern, const PathValues& values);
// The values for this process (the rank from util/local_rank.hpp; throws as
// it does for a malformed one).
PathValues this_process_path_values();

}  // namespace backplane::detail::trace
