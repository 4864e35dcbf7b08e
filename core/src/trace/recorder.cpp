// The trace recorder: per-thread buffers, tracks and lanes, sessions. The
// file format is written by writer.cpp.
#include "trace/recorder.hpp"

#include "util/fork.hpp"
#include "util/thread_name.hpp"

#include <backplane/error.hpp>

#include <fmt/format.h>

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

namespace backplane::detail::trace {

std::atomic<bool> g_enabled{false};
std::atomic<bool> g_recording{false};

namespace {

// The recorder of this process. Leaked on purpose: threads (transfer threads
// of the process-default runtime) may still record while static destructors
// run, and the atexit handler needs it. A forked child replaces the parent's
// (leaking it too: a parent thread may have held its locks at fork time) with
// a fresh one on first use, and turns the hooks off: the child records
// nothing into the parent's session, and a session it starts holds only its
// own events.
struct Current {
  std::atomic<Recorder*> recorder{new Recorder()};
  std::atomic<std::uint64_t> generation{fork_generation()};
};

Current& current() {
  static Current* instance = new Current();
  return *instance;
}

Recorder& recorder() {
  Current& now = current();
  const std::uint64_t generation = fork_generation();
  if (now.generation.load(std::memory_order_acquire) == generation) {
    return *now.recorder.load(std::memory_order_acquire);
  }
  // Only the forking thread exists when a child first gets here, unless the
  // child started threads before any of them touched the recorder: those
  // race to one fresh recorder.
  static ForkSafeMutex replacing;  // fork() never leaves it locked
  const std::lock_guard lock(replacing);
  if (now.generation.load(std::memory_order_acquire) != generation) {
    now.recorder.store(new Recorder(), std::memory_order_release);
    now.generation.store(generation, std::memory_order_release);
    g_recording.store(false, std::memory_order_seq_cst);
    g_enabled.store(tools_attached(), std::memory_order_relaxed);
  }
  return *now.recorder.load(std::memory_order_acquire);
}

const Clock::time_point kOrigin = Clock::now();

// The calling thread's buffer in `state`, registered on first use.
ThreadBuffer* thread_buffer(Recorder& state) {
  thread_local std::shared_ptr<ThreadBuffer> buffer;
  if (buffer && buffer->owner == &state) return buffer.get();
  auto made = std::make_shared<ThreadBuffer>();
  made->owner = &state;
  const std::lock_guard lock(state.mutex);
  const auto os_thread = static_cast<long>(gettid());
  made->track = state.add_track_locked(fmt::format("{} ({})", this_thread_name(), os_thread));
  state.buffers.push_back(made);
  buffer = std::move(made);
  return buffer.get();
}

void flush_at_exit() {
  try {
    stop();
  } catch (const std::exception& error) {
    std::fprintf(stderr, "backplane: error: writing the trace at exit failed: %s\n", error.what());
  }
}

}  // namespace

std::uint32_t Recorder::add_track_locked(std::string name) {
  track_names.push_back(std::move(name));
  return static_cast<std::uint32_t>(track_names.size());  // ids start at 1: 0 is "this thread"
}

void record(Event event) noexcept {
  Recorder& state = recorder();
  ThreadBuffer* buffer = nullptr;
  try {
    buffer = thread_buffer(state);
  } catch (...) {  // no memory to register: the event is lost
    return;
  }
  // Pairs with stop(): either stop() sees this flag and waits, or this thread
  // sees the session over and records nothing (both sides sequentially
  // consistent).
  buffer->writing.store(true, std::memory_order_seq_cst);
  if (state.open.load(std::memory_order_seq_cst)) {
    if (event.track == 0) event.track = buffer->track;
    const std::size_t capacity = state.capacity.load(std::memory_order_relaxed);
    try {
      if (state.stored.fetch_add(1, std::memory_order_relaxed) >= capacity) {
        // Full: this thread makes room by dropping its own oldest event.
        state.stored.fetch_sub(1, std::memory_order_relaxed);
        buffer->dropped += 1;
        if (!buffer->events.empty()) {
          buffer->events.pop_front();
          buffer->events.push_back(std::move(event));
        }
      } else {
        buffer->events.push_back(std::move(event));
      }
    } catch (...) {  // no memory for the event
      buffer->dropped += 1;
      state.stored.fetch_sub(1, std::memory_order_relaxed);
    }
  }
  buffer->writing.store(false, std::memory_order_release);
}

std::int64_t since_origin(Clock::time_point time) noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(time - kOrigin).count();
}

double timestamp_us(Clock::time_point time) noexcept { return static_cast<double>(since_origin(time)) / 1e3; }

Clock::time_point from_monotonic_ns(std::int64_t nanoseconds) noexcept {
  // libstdc++ and libc++ read steady_clock from CLOCK_MONOTONIC on Linux, so
  // its epoch is the monotonic clock's; tests/trace checks it.
  return Clock::time_point(std::chrono::duration_cast<Clock::duration>(std::chrono::nanoseconds(nanoseconds)));
}

Track track(std::string_view name) {
  if (!recording()) return {};
  Recorder& state = recorder();
  const std::lock_guard lock(state.mutex);
  if (auto found = state.named_tracks.find(name); found != state.named_tracks.end()) return Track{found->second};
  const std::uint32_t id = state.add_track_locked(std::string(name));
  state.named_tracks.emplace(std::string(name), id);
  return Track{id};
}

Track acquire_lane(std::string_view base, Clock::time_point begin) {
  if (!recording()) return {};
  Recorder& state = recorder();
  const std::lock_guard lock(state.mutex);
  auto found = state.lanes.find(base);
  if (found == state.lanes.end()) found = state.lanes.emplace(std::string(base), std::vector<Lane>{}).first;
  std::vector<Lane>& lanes = found->second;
  for (Lane& lane : lanes) {
    if (!lane.held && lane.free_since <= begin) {
      lane.held = true;
      return Track{lane.id};
    }
  }
  const std::uint32_t id = state.add_track_locked(fmt::format("{} #{}", base, lanes.size()));
  lanes.push_back(Lane{id, true, Clock::time_point{}});
  state.lane_owner.emplace(id, std::string(base));
  return Track{id};
}

void release_lane(Track lane) noexcept { release_lane(lane, Clock::now()); }

void release_lane(Track lane, Clock::time_point until) noexcept {
  if (lane.id == 0) return;
  Recorder& state = recorder();
  const auto now = std::max(Clock::now(), until);
  const std::lock_guard lock(state.mutex);
  const auto owner = state.lane_owner.find(lane.id);
  if (owner == state.lane_owner.end()) return;
  for (Lane& held : state.lanes.find(owner->second)->second) {
    if (held.id == lane.id) {
      held.held = false;
      held.free_since = now;
    }
  }
}

void complete(Track track, std::string_view category, std::string name, Clock::time_point begin, Clock::time_point end,
              Args args) noexcept {
  if (!recording()) return;
  try {
    record(Event{'X', track.id, since_origin(begin), since_origin(std::max(begin, end)) - since_origin(begin),
                 std::string(category), std::move(name), std::move(args)});
  } catch (...) {  // no memory to build the event
  }
}

void instant(Track track, std::string_view category, std::string name, Args args) noexcept {
  if (!recording()) return;
  try {
    record(
        Event{'i', track.id, since_origin(Clock::now()), 0, std::string(category), std::move(name), std::move(args)});
  } catch (...) {
  }
}

void counter(std::string name, Args values) noexcept {
  if (!recording()) return;
  try {
    record(Event{'C', 0, since_origin(Clock::now()), 0, std::string(category::kMemory), std::move(name),
                 std::move(values)});
  } catch (...) {
  }
}

void start(const std::filesystem::path& pattern, std::size_t capacity) {
  if (!BACKPLANE_TRACE_HOOKS) {
    throw Error(ErrorCode::kUnsupported,
                "trace_start: this build of backplane has its trace hooks compiled out (-Dtrace_hooks=false)");
  }
  Recorder& state = recorder();
  const std::lock_guard session(state.session);
  {
    const std::lock_guard lock(state.mutex);
    if (state.path) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("trace_start({}): a trace is already being recorded to {}; stop it first",
                              printable_path(pattern), printable_path(*state.path)));
    }
  }
  // Resolved now: the file is written where the path named when recording
  // began, whatever the process's directory is when it ends.
  const std::filesystem::path path = resolve_trace_path(pattern);
  std::unique_ptr<AtomicFile> file;
  try {
    file = std::make_unique<AtomicFile>(path, "write the trace");
  } catch (const Error& error) {
    // A directory that does not exist is a file that cannot be written.
    throw Error(error.code() == ErrorCode::kNotFound ? ErrorCode::kIo : error.code(),
                fmt::format("trace_start: {}", error.what()));
  }
  static std::once_flag exit_handler;  // inherited by a forked child, like the handler itself
  std::call_once(exit_handler, [] { std::atexit(flush_at_exit); });
  {
    const std::lock_guard lock(state.mutex);
    state.file = std::move(file);
    state.path = path;
    state.capacity.store(capacity == 0 ? kDefaultTraceCapacity : capacity, std::memory_order_relaxed);
    state.stored.store(0, std::memory_order_relaxed);
    state.pid = static_cast<std::int64_t>(getpid());
    state.open.store(true, std::memory_order_seq_cst);
  }
  g_recording.store(true, std::memory_order_seq_cst);
  g_enabled.store(true, std::memory_order_relaxed);
}

std::optional<std::filesystem::path> stop() {
  Recorder& state = recorder();  // in a forked child, its own: the parent's session is never touched
  const std::lock_guard session(state.session);
  Collected collected;
  std::unique_ptr<AtomicFile> file;
  std::filesystem::path path;
  {
    const std::lock_guard lock(state.mutex);
    if (!state.path) return std::nullopt;
    state.open.store(false, std::memory_order_seq_cst);
    // The hooks stay on after a session while an NVTX tool listens.
    g_recording.store(false, std::memory_order_seq_cst);
    g_enabled.store(tools_attached(), std::memory_order_relaxed);
    for (const auto& buffer : state.buffers) {
      // An append that saw the session still on finishes first.
      while (buffer->writing.load(std::memory_order_seq_cst)) std::this_thread::yield();
      collected.dropped += buffer->dropped;
      buffer->dropped = 0;
      std::move(buffer->events.begin(), buffer->events.end(), std::back_inserter(collected.events));
      buffer->events.clear();
    }
    // Buffers of threads that ended are no longer needed.
    std::erase_if(state.buffers, [](const std::shared_ptr<ThreadBuffer>& buffer) { return buffer.use_count() == 1; });
    state.stored.store(0, std::memory_order_relaxed);
    collected.capacity = state.capacity.load(std::memory_order_relaxed);
    collected.track_names = state.track_names;
    collected.pid = state.pid;
    path = *std::exchange(state.path, std::nullopt);
    file = std::move(state.file);
  }
  // Still under `session`: a trace started meanwhile waits for this file.
  write_trace(*file, std::move(collected));
  return path;
}

std::optional<std::filesystem::path> active_path() {
  Recorder& state = recorder();
  const std::lock_guard lock(state.mutex);
  return state.path;
}

}  // namespace backplane::detail::trace
