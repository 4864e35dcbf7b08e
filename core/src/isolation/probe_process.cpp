#include "isolation/probe_process.hpp"

#include "isolation/probe_protocol.hpp"
#include "loader/search_path.hpp"
#include "util/held_file.hpp"
#include "util/log.hpp"

#include <fmt/format.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <utility>
#include <vector>

extern char** environ;

namespace backplane::detail::isolation {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::string_view kHelperName = "backplane-probe";

bool is_executable(const std::filesystem::path& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

std::string describe_stage(const std::optional<std::string>& stage) {
  if (!stage) return "before loading the plugin";
  if (*stage == "load") return "loading (static constructors or the entry point)";
  return *stage;
}

std::string describe_signal(int signal) {
  const char* abbreviation = ::sigabbrev_np(signal);
  const char* description = ::strsignal(signal);
  return abbreviation == nullptr ? fmt::format("signal {}", signal)
                                 : fmt::format("SIG{} ({})", abbreviation, description ? description : "?");
}

// How a child that gave no verdict ended, as the reason for `failed`.
std::string describe_end(int wait_status, const std::string& stage) {
  if (WIFSIGNALED(wait_status)) {
    return fmt::format("crashed with {} during {} in a separate probe process; not loaded into this one",
                       describe_signal(WTERMSIG(wait_status)), stage);
  }
  return fmt::format("exited with status {} during {} in a separate probe process; not loaded into this one",
                     WEXITSTATUS(wait_status), stage);
}

// Waits for the child until `deadline` (none: forever); true once reaped.
bool reap(pid_t pid, int& wait_status, std::optional<Clock::time_point> deadline) {
  auto pause = std::chrono::microseconds(200);
  for (;;) {
    pid_t done = ::waitpid(pid, &wait_status, deadline ? WNOHANG : 0);
    if (done == pid) return true;
    if (done < 0 && errno != EINTR) return true;  // not our child any more: nothing to wait for
    if (deadline && Clock::now() >= *deadline) return false;
    if (deadline) {
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(10000));
    }
  }
}

struct Reading {
  RecordReader records;
  bool timed_out = false;
  bool reaped = false;  // the child was reaped while reading
  int wait_status = 0;
};

// Reads the child's records until `done`, end of file, or the deadline. The
// pipe may stay open after the child is gone (a process it forked holds it):
// the child's exit also ends the reading, once what it wrote is drained.
Reading read_verdict(int fd, pid_t pid, std::optional<Clock::time_point> deadline,
                     const std::function<void()>& on_first_record) {
  constexpr int kCheckExitMs = 50;
  // The helper's first record comes before it touches the plugin: a helper
  // silent this long is broken (or not ours), whatever the plugin deadline.
  constexpr auto kFirstRecordWithin = std::chrono::seconds(10);
  const Clock::time_point first_record_by = Clock::now() + kFirstRecordWithin;
  Reading reading;
  char buffer[4096];
  bool draining = false;  // the child is gone: read what is there, then stop
  while (!reading.records.done() && !reading.records.garbled()) {
    int wait_ms = draining ? 0 : kCheckExitMs;
    if (deadline && !draining) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(*deadline - Clock::now()).count();
      if (left <= 0) {
        reading.timed_out = true;
        break;
      }
      wait_ms = static_cast<int>(std::min<long long>(left, kCheckExitMs));
    }
    pollfd entry{fd, POLLIN, 0};
    const int ready = ::poll(&entry, 1, wait_ms);
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) break;
    if (ready == 0) {
      if (draining) break;
      if (reading.records.bytes_received() == 0 && Clock::now() >= first_record_by) {
        reading.timed_out = true;
        break;
      }
      if (!reading.reaped && ::waitpid(pid, &reading.wait_status, WNOHANG) == pid) {
        reading.reaped = true;
        draining = true;
      }
      continue;
    }
    const ssize_t got = ::read(fd, buffer, sizeof(buffer));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;  // every writer closed its end
    const bool first = reading.records.bytes_received() == 0;
    reading.records.feed({buffer, static_cast<std::size_t>(got)});
    if (first && on_first_record) on_first_record();
  }
  return reading;
}

// A decimal record of the child's, or nullopt when absent or not a number
// within [low, high].
std::optional<std::int64_t> number_record(const RecordReader& records, std::string_view key, std::int64_t low,
                                          std::int64_t high) {
  const auto text = records.get(key);
  if (!text) return std::nullopt;
  std::int64_t value = 0;
  const auto parsed = std::from_chars(text->data(), text->data() + text->size(), value);
  if (text->empty() || parsed.ec != std::errc() || parsed.ptr != text->data() + text->size() || value < low ||
      value > high) {
    return std::nullopt;
  }
  return value;
}

// What a probe-in-child plugin's probe found (see ChildVerdict::in_child);
// a snapshot that breaks the protocol fails the plugin.
void read_snapshot(const RecordReader& records, ChildVerdict& verdict) {
  verdict.in_child = true;
  const auto priority = number_record(records, "priority", INT32_MIN, INT32_MAX);
  const auto capabilities = number_record(records, "capabilities", 0, INT64_MAX);
  const auto dlpack = number_record(records, "dlpack", INT32_MIN, INT32_MAX);
  auto broken = [&](const std::string& problem) {
    verdict.status = BackendStatus::kFailed;
    verdict.reason = fmt::format("the probe process's answer is not the probe protocol: {}", problem);
    verdict.devices.clear();
  };
  if (!priority || !capabilities || !dlpack) {
    broken("priority, capabilities or dlpack is missing or not a number");
    return;
  }
  verdict.priority = static_cast<std::int32_t>(*priority);
  verdict.capabilities = static_cast<std::uint64_t>(*capabilities);
  verdict.dlpack_device_type = static_cast<std::int32_t>(*dlpack);
  for (std::size_t ordinal = 0; ordinal < records.devices().size(); ++ordinal) {
    std::string problem;
    auto device = decode_device(records.devices()[ordinal], problem);
    if (!device) {
      broken(fmt::format("device {}: {}", ordinal, problem));
      return;
    }
    device->ordinal = static_cast<int>(ordinal);
    verdict.devices.push_back(std::move(*device));
  }
}

std::string identity_key(const std::filesystem::path& file, const PluginOptions& options) {
  struct stat info {};
  if (::stat(file.c_str(), &info) != 0) return {};
  std::string key =
      fmt::format("{}:{}:{}:{}.{}", info.st_dev, info.st_ino, info.st_size, info.st_mtim.tv_sec, info.st_mtim.tv_nsec);
  for (const auto& [name, value] : options) key += fmt::format("\n{}={}", name, value);
  return key;
}

std::mutex good_mutex;
std::set<std::string>* good_plugins = new std::set<std::string>();  // never destroyed: used until exit
std::mutex override_mutex;
// Never destroyed: used until exit.
std::optional<std::filesystem::path>* helper_override = new std::optional<std::filesystem::path>();

}  // namespace

std::filesystem::path helper_path() {
  {
    std::lock_guard lock(override_mutex);
    if (helper_override->has_value()) return **helper_override;
  }
  if (auto plugins = plugin_dir_next_to_core(); !plugins.empty()) {
    auto next_to_core = plugins.parent_path() / kHelperName;
    if (is_executable(next_to_core)) return next_to_core;
  }
  // Empty in the Python package, whose only home is next to the library.
  if (std::string_view install_dir = BACKPLANE_PROBE_HELPER_INSTALL_DIR; !install_dir.empty()) {
    auto installed = std::filesystem::path(install_dir) / kHelperName;
    if (is_executable(installed)) return installed;
  }
  return {};
}

struct EnvironmentCopy {
  std::vector<std::string> entries;
  std::vector<char*> pointers;  // into entries, then NULL: what posix_spawn takes
};

namespace {

// The copy children get now, or null: never destroyed, since a probe thread
// of a detached discovery may read it while the process exits.
struct EnvironmentState {
  std::mutex mutex;
  std::shared_ptr<const EnvironmentCopy> current;
};
EnvironmentState& environment_state() {
  static auto* state = new EnvironmentState;
  return *state;
}

std::shared_ptr<const EnvironmentCopy> current_environment_copy() {
  EnvironmentState& state = environment_state();
  const std::lock_guard lock(state.mutex);
  return state.current;
}

}  // namespace

SpawnEnvironmentScope::SpawnEnvironmentScope() {
  auto copy = std::make_shared<EnvironmentCopy>();
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) copy->entries.emplace_back(*entry);
  for (std::string& entry : copy->entries) copy->pointers.push_back(entry.data());
  copy->pointers.push_back(nullptr);
  EnvironmentState& state = environment_state();
  const std::lock_guard lock(state.mutex);
  previous_ = std::exchange(state.current, std::move(copy));
}

SpawnEnvironmentScope::~SpawnEnvironmentScope() {
  EnvironmentState& state = environment_state();
  const std::lock_guard lock(state.mutex);
  state.current = std::move(previous_);
}

// posix_spawn, which glibc implements with clone(CLONE_VM | CLONE_VFORK) and
// an immediate exec, rather than fork(): the caller may have many threads,
// and after a plain fork() only async-signal-safe functions may run until
// exec (dlopen, malloc and the plugin's constructors are not, and a lock
// some other thread held at fork time stays locked forever in the child).
// Exec'ing a small helper gives the plugin a fresh single-threaded process,
// and the vfork-style start copies no page tables, however large the caller.
ChildVerdict probe_in_child(const std::filesystem::path& helper, const std::filesystem::path& file,
                            std::string_view expected_name, std::string_view backend_name, const PluginOptions& options,
                            std::uint32_t timeout_ms, const std::function<void()>& on_first_record) {
  ChildVerdict verdict;
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
    verdict.reason = fmt::format("cannot create a pipe for the probe process: {}", std::strerror(errno));
    return verdict;
  }
  std::vector<std::string> arguments = {helper.string(), std::to_string(::getpid()), file.string(),
                                        std::string(expected_name), std::string(backend_name)};
  for (const auto& [key, value] : options) {
    arguments.push_back(key);
    arguments.push_back(value);
  }
  std::vector<char*> argv;
  for (auto& argument : arguments) argv.push_back(argument.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  // A plugin's prints stay out of ours (and cannot fill a pipe we never read).
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], kResultFd);
  // A file an option names by its held descriptor (a PJRT library judged by
  // the caller) is reached in the child through the same number: a dup2 onto
  // itself only clears close-on-exec.
  for (const auto& [key, value] : options) {
    if (const std::optional<int> held = held_descriptor(value)) {
      posix_spawn_file_actions_adddup2(&actions, *held, *held);
    }
  }
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  sigset_t signals;
  sigemptyset(&signals);
  posix_spawnattr_setsigmask(&attributes, &signals);
  sigfillset(&signals);
  posix_spawnattr_setsigdefault(&attributes, &signals);
  // Its own process group, so that whatever the plugin forks dies with it.
  posix_spawnattr_setpgroup(&attributes, 0);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
  pid_t pid = 0;
  const std::shared_ptr<const EnvironmentCopy> copied = current_environment_copy();
  char* const* environment = copied != nullptr ? copied->pointers.data() : environ;
  const int spawn_error = ::posix_spawn(&pid, helper.c_str(), &actions, &attributes, argv.data(), environment);
  posix_spawnattr_destroy(&attributes);
  posix_spawn_file_actions_destroy(&actions);
  ::close(pipe_fds[1]);
  if (spawn_error != 0) {
    ::close(pipe_fds[0]);
    verdict.reason = fmt::format("cannot start {}: {}", helper.string(), std::strerror(spawn_error));
    return verdict;
  }
  verdict.started = true;

  std::optional<Clock::time_point> deadline;
  if (timeout_ms != 0) deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  const Reading reading = read_verdict(pipe_fds[0], pid, deadline, on_first_record);
  ::close(pipe_fds[0]);

  const std::string stage = describe_stage(reading.records.get("stage"));
  int wait_status = reading.wait_status;
  bool killed = false;
  if (!reading.reaped) {
    // A child that answered exits at once; one that closed the pipe gets what
    // is left of the deadline to exit.
    if (!reap(pid, wait_status, reading.timed_out ? Clock::now() : deadline)) {
      ::kill(-pid, SIGKILL);
      reap(pid, wait_status, std::nullopt);
      killed = true;
    }
  }
  // Whatever the plugin forked goes with it, whether it still holds the pipe
  // or not.
  ::kill(-pid, SIGKILL);

  verdict.silent = reading.records.bytes_received() == 0;
  const bool exited_cleanly = !killed && WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0;
  if (reading.records.done() && exited_cleanly) {
    verdict.answered = true;
    const std::string status = reading.records.get("status").value_or("");
    int number = -1;
    std::from_chars(status.data(), status.data() + status.size(), number);
    verdict.status = number >= 0 && number <= static_cast<int>(BackendStatus::kShadowed)
                         ? static_cast<BackendStatus>(number)
                         : BackendStatus::kFailed;
    verdict.reason = reading.records.get("reason").value_or("");
    verdict.abi_version = reading.records.get("abi").value_or("");
    verdict.name = reading.records.get("name").value_or("");
    if (reading.records.get("in_child") == "1") read_snapshot(reading.records, verdict);
    return verdict;
  }
  if (verdict.silent) {
    verdict.reason =
        killed || reading.timed_out
            ? fmt::format("{} wrote nothing to its result pipe before it was killed", helper.string())
            : fmt::format("{} wrote nothing to its result pipe and {}", helper.string(),
                          WIFSIGNALED(wait_status) ? describe_signal(WTERMSIG(wait_status))
                                                   : fmt::format("exited with status {}", WEXITSTATUS(wait_status)));
    return verdict;
  }
  if (killed) {
    verdict.reason = fmt::format(
        "did not answer within {} ms during {} in a separate probe process (BACKPLANE_PROBE_TIMEOUT_MS); "
        "the process was killed and the plugin not loaded into this one",
        timeout_ms, stage);
    return verdict;
  }
  if (reading.records.garbled()) {
    verdict.reason = fmt::format(
        "wrote {} bytes to the probe's result pipe that are not the probe protocol (starting \"{}\"), and {}",
        reading.records.bytes_received(), reading.records.garbage(), describe_end(wait_status, stage));
    return verdict;
  }
  if (reading.records.done()) {
    verdict.reason = fmt::format("gave a verdict that is not trusted, since the process then {}",
                                 describe_end(wait_status, "the probe's end"));
    return verdict;
  }
  verdict.reason = describe_end(wait_status, stage);
  return verdict;
}

void override_helper_for_testing(std::optional<std::filesystem::path> helper) {
  std::lock_guard lock(override_mutex);
  *helper_override = std::move(helper);
}

bool known_good(const std::filesystem::path& file, const PluginOptions& options) {
  std::string key = identity_key(file, options);
  std::lock_guard lock(good_mutex);
  return !key.empty() && good_plugins->contains(key);
}

void remember_good(const std::filesystem::path& file, const PluginOptions& options) {
  std::string key = identity_key(file, options);
  if (key.empty()) return;
  std::lock_guard lock(good_mutex);
  good_plugins->insert(std::move(key));
}

}  // namespace backplane::detail::isolation
