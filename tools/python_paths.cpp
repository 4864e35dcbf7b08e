#include "python_paths.hpp"

#include <fmt/format.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/auxv.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

extern char** environ;

namespace backplane::tools {
namespace {

using Clock = std::chrono::steady_clock;

// One path per line; NUL-free by construction of the program below.
constexpr const char* kProgram = "import sys\nfor p in sys.path:\n    print(p)\n";
constexpr std::size_t kMaxOutput = std::size_t{1} << 20;

enum class Ending { kExited, kTimedOut, kTooLong };

// Whether the child has exited, without reaping it: its process group stays
// there for the caller to kill.
bool has_exited(pid_t pid) {
  siginfo_t info{};
  return ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid;
}

// Reads the interpreter's answer from `pipe` until the interpreter exits,
// within kPythonTimeoutMs for the whole exchange. The end of the pipe is not
// the end of the exchange: an interpreter may close its stdout and live on,
// and a process it started may hold the pipe open after it exits. What the
// interpreter wrote before it exited is in the pipe by then, and is read.
Ending read_answer(int pipe, pid_t pid, std::string& output) {
  const Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(kPythonTimeoutMs);
  // The pipe is polled; the exit is looked at between polls, at least this often.
  constexpr int kExitCheckMs = 5;
  bool pipe_open = true;
  char buffer[4096];
  auto read_ready = [&](int wait_ms) {
    pollfd entry{pipe, POLLIN, 0};
    const int ready = ::poll(&entry, 1, wait_ms);
    if (ready <= 0) return false;  // nothing yet, or EINTR: the caller looks again
    const ssize_t got = ::read(pipe, buffer, sizeof(buffer));
    if (got < 0) return errno == EINTR;
    if (got == 0) {
      pipe_open = false;
      return false;
    }
    output.append(buffer, static_cast<std::size_t>(got));
    return true;
  };
  for (;;) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return Ending::kTimedOut;
    const int slice = static_cast<int>(std::min<long long>(left, kExitCheckMs));
    if (pipe_open) {
      read_ready(slice);
    } else {
      ::poll(nullptr, 0, slice);
    }
    if (output.size() > kMaxOutput) return Ending::kTooLong;
    if (has_exited(pid)) {
      while (pipe_open && read_ready(0) && output.size() <= kMaxOutput) {
      }
      return output.size() > kMaxOutput ? Ending::kTooLong : Ending::kExited;
    }
  }
}

}  // namespace

PythonPaths ask_python_for_paths() {
  PythonPaths asked;
  // An elevated process runs nothing that PATH or the environment chose.
  if (::getauxval(AT_SECURE) != 0) {
    asked.note = "not asked: the process is elevated";
    return asked;
  }
  const char* chosen = std::getenv("BACKPLANE_PYTHON");
  if (chosen != nullptr && *chosen == '\0') {
    asked.note = "not asked: BACKPLANE_PYTHON is empty";
    return asked;
  }
  asked.interpreter = chosen != nullptr ? chosen : "python3";
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
    asked.note = fmt::format("cannot ask {}: pipe: {}", asked.interpreter, std::strerror(errno));
    return asked;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 1);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  posix_spawnattr_setpgroup(&attributes, 0);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);
  std::string interpreter = asked.interpreter;
  std::string flag = "-c";
  std::string program = kProgram;
  char* argv[] = {interpreter.data(), flag.data(), program.data(), nullptr};
  pid_t pid = 0;
  const int spawned = ::posix_spawnp(&pid, interpreter.c_str(), &actions, &attributes, argv, environ);
  posix_spawnattr_destroy(&attributes);
  posix_spawn_file_actions_destroy(&actions);
  ::close(pipe_fds[1]);
  if (spawned != 0) {
    ::close(pipe_fds[0]);
    asked.note = fmt::format("cannot run {}: {}", asked.interpreter, std::strerror(spawned));
    return asked;
  }
  std::string output;
  const Ending ending = read_answer(pipe_fds[0], pid, output);
  ::close(pipe_fds[0]);
  // The whole group goes, whatever the ending: an interpreter still running
  // after its answer or its time, and anything it started that kept the
  // pipe (a grandchild would otherwise outlive `info`).
  ::kill(-pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (ending == Ending::kTimedOut) {
    asked.note = fmt::format("{} did not answer and exit within {} ms; killed; no Python packages listed",
                             asked.interpreter, kPythonTimeoutMs);
    return asked;
  }
  if (ending == Ending::kTooLong) {
    asked.note = fmt::format("{} answered more than {} bytes of sys.path; killed; no Python packages listed",
                             asked.interpreter, kMaxOutput);
    return asked;
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    asked.note = WIFEXITED(status) && WEXITSTATUS(status) == 127
                     ? fmt::format("{} was not found", asked.interpreter)
                     : fmt::format("{} failed (exit status {}); no Python packages listed", asked.interpreter,
                                   WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    return asked;
  }
  std::string_view rest(output);
  while (!rest.empty()) {
    const std::size_t end = rest.find('\n');
    const std::string_view line = rest.substr(0, end);
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
    if (!line.empty()) asked.paths.emplace_back(std::string(line));
  }
  asked.note = fmt::format("asked {}: {} directories", asked.interpreter, asked.paths.size());
  return asked;
}

}  // namespace backplane::tools
