// The recorder's state, shared by recorder.cpp (recording, sessions) and
// writer.cpp (the file). Nothing outside core/src/trace includes it.
#pragma once

#include "trace/trace.hpp"
#include "util/atomic_file.hpp"

#include <backplane/trace.hpp>

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

struct Recorder;

// One thread's events. Only its thread appends, with `writing` set; stop()
// reads it with the recorder's lock held, once `writing` is clear.
struct ThreadBuffer {
  const Recorder* owner = nullptr;  // the recorder it is registered with
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

// One per process: a forked child gets a fresh one (recorder.cpp), so it
// starts with no buffers, tracks or session, and never takes a lock that a
// parent thread held at fork time.
struct Recorder {
  // Serialises start() and stop(), the writing of the file included: a
  // session starts only once the previous one's file is written.
  std::mutex session;
  std::mutex mutex;  // guards everything below that is not atomic
  std::vector<std::shared_ptr<ThreadBuffer>> buffers;
  std::vector<std::string> track_names;  // track id - 1 -> name
  std::map<std::string, std::uint32_t, std::less<>> named_tracks;
  std::map<std::string, std::vector<Lane>, std::less<>> lanes;  // by base name
  std::map<std::uint32_t, std::string> lane_owner;              // lane id -> base name
  // While recording: the file (its temporary, in the directory resolved at
  // start) and its absolute path.
  std::unique_ptr<AtomicFile> file;
  std::optional<std::filesystem::path> path;
  std::int64_t pid = 0;
  std::atomic<bool> open{false};  // appends are taken (a session is on)
  std::atomic<std::size_t> capacity{kDefaultTraceCapacity};
  std::atomic<std::size_t> stored{0};  // events in all buffers

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

// `pattern` checked and expanded (expand_trace_path, for this process) and
// made absolute against the current directory; throws as expand_trace_path,
// and Error(kIo) when the current directory cannot be read.
std::filesystem::path resolve_trace_path(const std::filesystem::path& pattern);
// A path as a message shows it: NUL and control bytes as \xNN.
std::string printable_path(const std::filesystem::path& path);

// Appends `event` to the calling thread's buffer (see trace.hpp, Capacity).
void record(Event event) noexcept;
// Sorts the events, drops the oldest beyond the capacity, writes them into
// `file` and renames it into place. Throws Error(kIo) naming the file when
// it cannot be written.
void write_trace(AtomicFile& file, Collected collected);

}  // namespace backplane::detail::trace
