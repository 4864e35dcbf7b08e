// Wall time of `backplane info` from process start to exit (discovery,
// loading and probing every plugin), against starting a trivial program
// (/bin/true) in the same run; then the cost of probe isolation: the same
// command with BACKPLANE_PROBE_ISOLATION=process against =none, per plugin
// probed.
#include "bench_util.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <spawn.h>
#include <sys/wait.h>

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

extern char** environ;

namespace {

// The process environment with BACKPLANE_PROBE_ISOLATION set to `isolation`
// (when not empty).
std::vector<char*> environment_with(std::vector<std::string>& storage, const std::string& isolation) {
  storage.clear();
  for (char** entry = environ; *entry != nullptr; ++entry) {
    if (std::string_view(*entry).starts_with("BACKPLANE_PROBE_ISOLATION=")) continue;
    storage.emplace_back(*entry);
  }
  if (!isolation.empty()) storage.push_back("BACKPLANE_PROBE_ISOLATION=" + isolation);
  std::vector<char*> pointers;
  for (auto& entry : storage) pointers.push_back(entry.data());
  pointers.push_back(nullptr);
  return pointers;
}

// Runs argv with stdout and stderr sent to /dev/null; returns the exit status.
int run_quietly(char* const argv[], char* const envp[] = environ) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid = 0;
  int status = -1;
  if (posix_spawn(&pid, argv[0], &actions, nullptr, argv, envp) == 0) waitpid(pid, &status, 0);
  posix_spawn_file_actions_destroy(&actions);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// Plugins `info` loads and probes (every listed one but shadowed and disabled).
int probed_plugins(const std::string& tool) {
  FILE* pipe = ::popen((tool + " info --json 2>/dev/null").c_str(), "r");
  if (pipe == nullptr) return 0;
  std::string output;
  char buffer[4096];
  std::size_t got = 0;
  while ((got = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) output.append(buffer, got);
  ::pclose(pipe);
  int count = 0;
  const nlohmann::json info = nlohmann::json::parse(output, nullptr, false);
  if (!info.is_object() || !info.contains("backends")) return 0;
  for (const auto& backend : info["backends"]) {
    if (backend["status"] != "shadowed" && backend["status"] != "disabled") ++count;
  }
  return count;
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
  std::vector<std::string> storage_none, storage_process;
  auto in_process = environment_with(storage_none, "none");
  auto isolated = environment_with(storage_process, "process");
  if (run_quietly(tool_argv, in_process.data()) != 0 || run_quietly(tool_argv, isolated.data()) != 0) {
    fmt::print(stderr, "{} info failed\n", argv[1]);
    return 1;
  }
  double baseline = backplane::bench::median_seconds(kRepeats, [&] { run_quietly(true_argv); });
  double cold = backplane::bench::median_seconds(kRepeats, [&] { run_quietly(tool_argv, in_process.data()); });
  fmt::print("backplane info, process start to exit: {:.2f} ms (median of {})\n", cold * 1e3, kRepeats);
  fmt::print("/bin/true, process start to exit:      {:.2f} ms\n", baseline * 1e3);
  fmt::print("ratio: {:.1f}x, backplane's own cost {:.2f} ms\n", cold / baseline, (cold - baseline) * 1e3);

  const int plugins = probed_plugins(argv[1]);
  double cold_isolated = backplane::bench::median_seconds(kRepeats, [&] { run_quietly(tool_argv, isolated.data()); });
  fmt::print("\nprobe isolation ({} plugin(s) probed):\n", plugins);
  fmt::print("  BACKPLANE_PROBE_ISOLATION=none:    {:.2f} ms\n", cold * 1e3);
  fmt::print("  BACKPLANE_PROBE_ISOLATION=process: {:.2f} ms\n", cold_isolated * 1e3);
  fmt::print("  ratio: {:.2f}x; isolation costs {:.2f} ms per plugin\n", cold_isolated / cold,
             plugins > 0 ? (cold_isolated - cold) * 1e3 / plugins : 0.0);
  return 0;
}
