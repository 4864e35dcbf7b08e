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
// NVTX. Where the core is built with NVTX (BACKPLANE_NVTX, on when the
// toolkit's nvtx3 headers are found) and a tool such as Nsight Systems is
// attached, the spans are also NVTX ranges in the domain "backplane", whether
// or not a trace is recorded. enabled() is then true with no trace recorded:
// hooks run, recording() tells whether the Chrome trace wants the event. NVTX
// cannot back-date a range, so a span starts its range where its work begins:
//   - Scope pushes a range on its thread and pops it at destruction;
//   - Range (start/end, any thread) is for spans recorded after the fact with
//     complete(): it is made when the begin time is taken and ended (or
//     destroyed) when the event is recorded. Transfers, staging copies, batch
//     stream steps hold one.
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
// is the parent's) and records nothing.
#pragma once

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

// An NVTX start/end range from construction to end() or destruction, on any
// thread. Nothing at all when no tool is attached.
class Range {
 public:
  Range() = default;
  explicit Range(std::string_view name, std::uint64_t bytes = 0) noexcept {
    if (!enabled() || !tools_attached()) return;
    try {
      id_ = nvtx_start(std::string(name), bytes);
    } catch (...) {  // no memory for the name: no range
    }
  }
  ~Range() { end(); }
  Range(Range&& other) noexcept : id_(std::exchange(other.id_, 0)) {}
  Range& operator=(Range&& other) noexcept {
    if (this != &other) {
      end();
      id_ = std::exchange(other.id_, 0);
    }
    return *this;
  }
  void end() noexcept {
    if (id_ != 0) nvtx_end(std::exchange(id_, 0));
  }

 private:
  std::uint64_t id_ = 0;
};

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

// A complete event on the calling thread's track for the lifetime of the
// object, and an NVTX push/pop range when a tool is attached: begins at
// construction when the hooks are on (otherwise does nothing at all),
// recorded at destruction with the args added meanwhile.
class Scope {
 public:
  Scope(std::string_view category, std::string name) noexcept {
    if (!enabled()) return;
    pushed_ = tools_attached();
    if (pushed_) nvtx_push(name);
    category_ = category;
    name_ = std::move(name);
    begin_ = Clock::now();
    active_ = recording();
  }
  ~Scope() {
    if (active_) complete(Track{}, category_, std::move(name_), begin_, Clock::now(), std::move(args_));
    if (pushed_) nvtx_pop();
  }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

  // True when the event is recorded: worth adding args to.
  bool active() const { return active_; }
  void arg(Arg value) noexcept {
    if (!active_) return;
    try {
      args_.push_back(std::move(value));
    } catch (...) {  // no memory: the event goes without this argument
    }
  }

 private:
  bool active_ = false;
  bool pushed_ = false;
  std::string_view category_;
  std::string name_;
  Clock::time_point begin_;
  Args args_;
};

// ---- sessions (the public trace_start/trace_stop and the runtime call these)

inline constexpr std::size_t kDefaultCapacity = std::size_t{1} << 20;

// Starts recording to `path`, which is created (truncated) at once so that a
// path that cannot be written is an error now: Error(kIo) naming the path and
// the reason. Error(kInvalidArgument) when a trace is already being recorded
// (naming its file) or `capacity` is 0. Registers an atexit handler that
// writes the file if the process exits while recording. Thread-safe.
void start(const std::filesystem::path& path, std::size_t capacity = kDefaultCapacity);
// Stops recording and writes the file. Returns the path written, or nullopt
// when no trace was being recorded (also in a forked child). Error(kIo) when
// the file cannot be written (recording has stopped nonetheless).
std::optional<std::filesystem::path> stop();
// The file of the trace being recorded, if any.
std::optional<std::filesystem::path> active_path();

// Writes `text` as the inside of a JSON string (without quotes) onto `out`:
// escapes quotes, backslashes and control characters, and replaces bytes that
// are not UTF-8 with U+FFFD.
void append_json_string(std::string& out, std::string_view text);

}  // namespace backplane::detail::trace
