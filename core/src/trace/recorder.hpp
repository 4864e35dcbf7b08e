// The recorder's state, shared by recorder.cpp (recording, sessions) and
// writer.cpp (the file). Nothing outside core/src/trace includes it.
#pragma once

#include "trace/trace.hpp"

#include <atomic>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace backplane::detail::trace {

struct Event {
  char phase;             // 'X', 'i' or 'C'
  std::uint32_t track;    // 0 until recorded: then the recording thread's track
  std::int64_t begin_ns;  // since the process's origin
  std::int64_t duration_ns;
  std::string category;
  std::string name;
  Args args;
};

// One thread's events. Only its thread appends, with `writing` set; stop()
// reads it with the recorder's lock held, once `writing` is clear.
struct ThreadBuffer {
  std::atomic<bool> writing{false};
  std::deque<Event> events;
  std::uint64_t dropped = 0;
  std::uint32_t track = 0;
};

struct Lane {
  std::uint32_t id;
  bool held;
  Clock::time_point free_since;  // when it was last released
};

struct Recorder {
  std::mutex mutex;  // guards everything below that is not atomic
  std::vector<std::shared_ptr<ThreadBuffer>> buffers;
  std::vector<std::string> track_names;  // track id - 1 -> name
  std::map<std::string, std::uint32_t, std::less<>> named_tracks;
  std::map<std::string, std::vector<Lane>, std::less<>> lanes;  // by base name
  std::map<std::uint32_t, std::string> lane_owner;              // lane id -> base name
  std::optional<std::filesystem::path> path;                    // set while recording
  std::int64_t pid = 0;
  bool exit_handler_installed = false;
  std::atomic<std::size_t> capacity{kDefaultCapacity};
  std::atomic<std::size_t> stored{0};        // events in all buffers
  std::atomic<std::uint64_t> generation{0};  // fork_generation() of the session

  // With `mutex` held: a new track id for `name`.
  std::uint32_t add_track_locked(std::string name);
};

// What stop() hands to the writer.
struct Collected {
  std::vector<Event> events;
  std::vector<std::string> track_names;
  std::uint64_t dropped = 0;
  std::size_t capacity = 0;
  std::int64_t pid = 0;
};

// Appends `event` to the calling thread's buffer (see trace.hpp, Capacity).
void record(Event event) noexcept;
// Sorts the events, drops the oldest beyond the capacity and writes the file.
// Throws Error(kIo) naming the path when it cannot be written.
void write_trace(const std::filesystem::path& path, Collected collected);

}  // namespace backplane::detail::trace
