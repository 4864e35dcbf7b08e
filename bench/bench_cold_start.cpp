// Wall time of `backplane info` from process start to exit (discovery,
// loading and probing every plugin), against starting a trivial program
// (/bin/true) in the same run; then the cost of probe isolation: the same
// command with BACKPLANE_PROBE_ISOLATION=process against =none, per plugin
// probed; then what concurrent discovery buys: `info` with every plugin
// against `info` with only the plugin that is slowest alone.
#include "bench_util.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <spawn.h>
#include <sys/wait.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

extern char** environ;

namespace {

// The process environment with each of `overrides` set, replacing what it
// had for that variable.
std::vector<char*> environment_with(std::vector<std::string>& storage,
                                    const std::vector<std::pair<std::string, std::string>>& overrides) {
  storage.clear();
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string_view text(*entry);
    const bool overridden = std::any_of(overrides.begin(), overrides.end(),
                                        [&](const auto& override_) { return text.starts_with(override_.first + "="); });
    if (!overridden) storage.emplace_back(text);
  }
  for (const auto& [name, value] : overrides) storage.push_back(name + "=" + value);
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

// The backends `info` loads and probes (every listed one but shadowed and
// disabled).
std::vector<std::string> probed_backends(const std::string& tool) {
  FILE* pipe = ::popen((tool + " info --json 2>/dev/null").c_str(), "r");
  if (pipe == nullptr) return {};
  std::string output;
  char buffer[4096];
  std::size_t got = 0;
  while ((got = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) output.append(buffer, got);
  ::pclose(pipe);
  std::vector<std::string> names;
  const nlohmann::json info = nlohmann::json::parse(output, nullptr, false);
  if (!info.is_object() || !info.contains("backends")) return {};
  for (const auto& backend : info["backends"]) {
    if (backend["status"] != "shadowed" && backend["status"] != "disabled") names.push_back(backend["name"]);
  }
  return names;
}

// A way to run `info`: its name and environment.
struct Variant {
  std::string label;
  std::vector<std::string> storage;
  std::vector<char*> environment;
};

// The median wall time of each variant of `info`, run in turns, so that the
// machine's slower and faster moments fall on all of them alike.
std::vector<double> interleaved_medians(char* const tool_argv[], std::vector<Variant>& variants, int repeats) {
  std::vector<std::vector<double>> samples(variants.size());
  for (int repeat = 0; repeat < repeats; ++repeat) {
    for (std::size_t i = 0; i < variants.size(); ++i) {
      const auto start = backplane::bench::Clock::now();
      run_quietly(tool_argv, variants[i].environment.data());
      samples[i].push_back(std::chrono::duration<double>(backplane::bench::Clock::now() - start).count());
    }
  }
  std::vector<double> medians;
  for (auto& each : samples) {
    std::sort(each.begin(), each.end());
    medians.push_back(each[each.size() / 2]);
  }
  return medians;
}

// Discovery probes plugins concurrently, so `info` with every plugin should
// cost about what it costs with only the plugin that is slowest alone (the
// others disabled by BACKPLANE_BACKENDS, so never loaded). Probed one after
// another it would cost the floor (`info` probing nothing) plus what each
// plugin adds alone: printed as the serial estimate.
bool discovery_against_slowest(char* const tool_argv[], const std::vector<std::string>& backends,
                               const std::string& isolation, int repeats) {
  std::vector<Variant> variants;
  auto add = [&](std::string label, std::vector<std::pair<std::string, std::string>> overrides) {
    overrides.emplace_back("BACKPLANE_PROBE_ISOLATION", isolation);
    Variant& variant = variants.emplace_back();
    variant.label = std::move(label);
    variant.environment = environment_with(variant.storage, overrides);
  };
  add("every plugin", {});
  add("no plugin probed", {{"BACKPLANE_BACKENDS", "bench_no_such_backend"}});
  for (const auto& name : backends) add("only " + name, {{"BACKPLANE_BACKENDS", name}});
  for (auto& variant : variants) {
    if (run_quietly(tool_argv, variant.environment.data()) != 0) {
      fmt::print(stderr, "{} info ({}, isolation {}) failed\n", tool_argv[0], variant.label, isolation);
      return false;
    }
  }
  const std::vector<double> medians = interleaved_medians(tool_argv, variants, repeats);
  const double all = medians[0];
  const double floor = medians[1];
  std::size_t slowest = 2;
  double serial = floor;
  fmt::print("\nconcurrent discovery, BACKPLANE_PROBE_ISOLATION={} (medians of {}, run in turns):\n", isolation,
             repeats);
  fmt::print("  no plugin probed:      {:7.2f} ms\n", floor * 1e3);
  for (std::size_t i = 2; i < variants.size(); ++i) {
    fmt::print("  {:<22}{:7.2f} ms (+{:.2f} ms)\n", variants[i].label + ":", medians[i] * 1e3,
               (medians[i] - floor) * 1e3);
    serial += medians[i] - floor;
    if (medians[i] > medians[slowest]) slowest = i;
  }
  fmt::print("  every plugin:          {:7.2f} ms\n", all * 1e3);
  if (variants.size() > 2) {
    fmt::print("  ratio to the slowest alone ({}): {:.2f}x (goal <= 1.2x)\n", variants[slowest].label,
               all / medians[slowest]);
  }
  fmt::print("  serial estimate (floor + each plugin's own cost): {:.2f} ms; ratio to it: {:.2f}x\n", serial * 1e3,
             all / serial);
  return true;
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
  auto in_process = environment_with(storage_none, {{"BACKPLANE_PROBE_ISOLATION", "none"}});
  auto isolated = environment_with(storage_process, {{"BACKPLANE_PROBE_ISOLATION", "process"}});
  if (run_quietly(tool_argv, in_process.data()) != 0 || run_quietly(tool_argv, isolated.data()) != 0) {
    fmt::print(stderr, "{} info failed\n", argv[1]);
    return 1;
  }
  double baseline = backplane::bench::median_seconds(kRepeats, [&] { run_quietly(true_argv); });
  double cold = backplane::bench::median_seconds(kRepeats, [&] { run_quietly(tool_argv, in_process.data()); });
  fmt::print("backplane info, process start to exit: {:.2f} ms (median of {})\n", cold * 1e3, kRepeats);
  fmt::print("/bin/true, process start to exit:      {:.2f} ms\n", baseline * 1e3);
  fmt::print("ratio: {:.1f}x, backplane's own cost {:.2f} ms\n", cold / baseline, (cold - baseline) * 1e3);

  const std::vector<std::string> backends = probed_backends(argv[1]);
  const int plugins = static_cast<int>(backends.size());
  double cold_isolated = backplane::bench::median_seconds(kRepeats, [&] { run_quietly(tool_argv, isolated.data()); });
  fmt::print("\nprobe isolation ({} plugin(s) probed):\n", plugins);
  fmt::print("  BACKPLANE_PROBE_ISOLATION=none:    {:.2f} ms\n", cold * 1e3);
  fmt::print("  BACKPLANE_PROBE_ISOLATION=process: {:.2f} ms\n", cold_isolated * 1e3);
  fmt::print("  ratio: {:.2f}x; isolation costs {:.2f} ms per plugin\n", cold_isolated / cold,
             plugins > 0 ? (cold_isolated - cold) * 1e3 / plugins : 0.0);

  for (const char* isolation : {"none", "process"}) {
    if (!discovery_against_slowest(tool_argv, backends, isolation, kRepeats)) return 1;
  }
  return 0;
}
