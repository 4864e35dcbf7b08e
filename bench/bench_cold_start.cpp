// Wall time of `backplane info` from process start to exit (discovery,
// loading and probing every plugin), against starting a trivial program
// (/bin/true) in the same run.
#include "bench_util.hpp"

#include <fmt/format.h>

#include <spawn.h>
#include <sys/wait.h>

#include <fcntl.h>
#include <unistd.h>

extern char** environ;

namespace {

// Runs argv with stdout and stderr sent to /dev/null; returns the exit status.
int run_quietly(char* const argv[]) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid = 0;
  int status = -1;
  if (posix_spawn(&pid, argv[0], &actions, nullptr, argv, environ) == 0) waitpid(pid, &status, 0);
  posix_spawn_file_actions_destroy(&actions);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    fmt::print(stderr, "usage: bench_cold_start PATH/TO/backplane\n");
    return 2;
  }
  constexpr int kRepeats = 21;
  char info[] = "info";
  char* tool_argv[] = {argv[1], info, nullptr};
  char true_path[] = "/bin/true";
  char* true_argv[] = {true_path, nullptr};
  if (run_quietly(tool_argv) != 0) {
    fmt::print(stderr, "{} info failed\n", argv[1]);
    return 1;
  }
  double baseline = backplane::bench::median_seconds(kRepeats, [&] { run_quietly(true_argv); });
  double cold = backplane::bench::median_seconds(kRepeats, [&] { run_quietly(tool_argv); });
  fmt::print("backplane info, process start to exit: {:.2f} ms (median of {})\n", cold * 1e3, kRepeats);
  fmt::print("/bin/true, process start to exit:      {:.2f} ms\n", baseline * 1e3);
  fmt::print("ratio: {:.1f}x, backplane's own cost {:.2f} ms\n", cold / baseline, (cold - baseline) * 1e3);
  return 0;
}
