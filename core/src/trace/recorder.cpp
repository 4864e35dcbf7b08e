// The trace recorder: per-thread buffers, tracks and lanes, sessions. The
// file format is written by writer.cpp.
#include "trace/recorder.hpp"

#include "util/fork.hpp"

#include <backplane/error.hpp>

#include <fmt/format.h>

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

namespace backplane::detail::trace {

std::atomic<bool> g_enabled{false};
std::atomic<bool> g_recording{false};

namespace {

// Leaked on purpose: threads (transfer threads of the process-default
// runtime) may still record while static destructors run, and the atexit
// handler needs it.
Recorder& recorder() {
  static Recorder* instance = new Recorder();
  return *instance;
}

const Clock::time_point kOrigin = Clock::now();

std::string current_thread_name() {
  char name[64] = {};
  if (pthread_getname_np(pthread_self(), name, sizeof name) != 0 || name[0] == '\0') return "thread";
  return name;
}

// The calling thread's buffer, registered on first use. Null in a forked
// child (registering could take a lock a parent thread held).
ThreadBuffer* thread_buffer() {
  thread_local std::shared_ptr<ThreadBuffer> buffer;
  if (buffer) return buffer.get();
  Recorder& state = recorder();
  if (fork_generation() != state.generation.load(std::memory_order_relaxed)) return nullptr;
  auto made = std::make_shared<ThreadBuffer>();
  const std::lock_guard lock(state.mutex);
  const auto os_thread = static_cast<long>(gettid());
  made->track = state.add_track_locked(fmt::format("{} ({})", current_thread_name(), os_thread));
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
  ThreadBuffer* buffer = nullptr;
  try {
    buffer = thread_buffer();
  } catch (...) {  // no memory to register: the event is lost
    return;
  }
  if (buffer == nullptr) return;
  Recorder& state = recorder();
  // Pairs with stop(): either stop() sees this flag and waits, or this thread
  // sees the session over and records nothing (both sides sequentially
  // consistent).
  buffer->writing.store(true, std::memory_order_seq_cst);
  if (g_recording.load(std::memory_order_seq_cst) &&
      fork_generation() == state.generation.load(std::memory_order_relaxed)) {
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
  if (fork_generation() != state.generation.load(std::memory_order_relaxed)) return;
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
    record(Event{'C', 0, since_origin(Clock::now()), 0, "memory", std::move(name), std::move(values)});
  } catch (...) {
  }
}

void start(const std::filesystem::path& path, std::size_t capacity) {
  if (!BACKPLANE_TRACE_HOOKS) {
    throw Error(ErrorCode::kUnsupported,
                "trace_start: this build of backplane has its trace hooks compiled out (-Dtrace_hooks=false)");
  }
  if (capacity == 0) throw Error(ErrorCode::kInvalidArgument, "trace_start: the capacity must be at least 1 event");
  Recorder& state = recorder();
  const std::lock_guard lock(state.mutex);
  if (state.path && state.generation.load(std::memory_order_relaxed) == fork_generation()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("trace_start({}): a trace is already being recorded to {}; stop it first", path.string(),
                            state.path->string()));
  }
  // Created now: a path that cannot be written fails here, not at exit.
  if (std::FILE* file = std::fopen(path.c_str(), "w")) {
    std::fclose(file);
  } else {
    const int error = errno;
    throw Error(ErrorCode::kIo, fmt::format("trace_start: cannot write {}: {}", path.string(), std::strerror(error)));
  }
  if (!state.exit_handler_installed) {
    std::atexit(flush_at_exit);
    state.exit_handler_installed = true;
  }
  state.path = path;
  state.capacity.store(capacity, std::memory_order_relaxed);
  state.stored.store(0, std::memory_order_relaxed);
  state.generation.store(fork_generation(), std::memory_order_relaxed);
  state.pid = static_cast<std::int64_t>(getpid());
  g_recording.store(true, std::memory_order_seq_cst);
  g_enabled.store(true, std::memory_order_relaxed);
}

namespace {

// The hooks stay on after a session while an NVTX tool listens.
void session_over() noexcept {
  g_recording.store(false, std::memory_order_seq_cst);
  g_enabled.store(tools_attached(), std::memory_order_relaxed);
}

}  // namespace

std::optional<std::filesystem::path> stop() {
  Recorder& state = recorder();
  // A forked child never touches the parent's session (nor its lock).
  if (state.generation.load(std::memory_order_relaxed) != fork_generation()) {
    session_over();
    return std::nullopt;
  }
  Collected collected;
  std::filesystem::path path;
  {
    const std::lock_guard lock(state.mutex);
    if (!state.path) return std::nullopt;
    session_over();
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
  }
  write_trace(path, std::move(collected));
  return path;
}

std::optional<std::filesystem::path> active_path() {
  Recorder& state = recorder();
  if (state.generation.load(std::memory_order_relaxed) != fork_generation()) return std::nullopt;
  const std::lock_guard lock(state.mutex);
  return state.path;
}

}  // namespace backplane::detail::trace
