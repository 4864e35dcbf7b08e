// Probe isolation from code, the environment and the config file: a plugin
// that crashes, exits or hangs in the probe helper is `failed` with what
// happened, it is never loaded into the test process, and the others work.
#include "support/backend_named.hpp"
#include "support/keep_segv_in_child.hpp"
#include "support/loaded_library.hpp"
#include "support/process_running.hpp"
#include "support/temp_dir.hpp"

#include "config/config.hpp"
#include "isolation/probe_process.hpp"

#include <backplane/backplane.hpp>

#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <thread>

using namespace std::string_literals;
using backplane::BackendInfo;
using backplane::BackendStatus;
using backplane::ProbeIsolation;
using backplane::Runtime;
using backplane::testing::backend_named;
using backplane::testing::is_loaded;
using backplane::testing::is_running;
using backplane::testing::KeepSegvInChild;
using backplane::testing::TempDir;

namespace {

const std::filesystem::path kPluginDir = BP_TEST_PLUGIN_DIR;
const std::filesystem::path kMisbehavingDir = BP_TEST_MISBEHAVING_DIR;

std::filesystem::path misbehaving(const std::string& name) { return kMisbehavingDir / ("backplane-" + name + ".so"); }

Runtime::Options options_for(std::vector<std::filesystem::path> paths,
                             std::map<std::string, std::string> environment = {}) {
  Runtime::Options options;
  options.plugin_paths = std::move(paths);
  options.environment = std::move(environment);
  options.skip_default_paths = true;
  return options;
}

}  // namespace

TEST_CASE("[discovery] isolation from code: crashing and exiting plugins are failed, cpu works") {
  KeepSegvInChild keep_segv;
  auto options = options_for({misbehaving("crash_probe"), misbehaving("exit_constructor"), kPluginDir});
  options.probe_isolation = ProbeIsolation::kProcess;
  Runtime runtime(options);
  const BackendInfo& crash = backend_named(runtime, "crash_probe");
  CHECK(crash.status == BackendStatus::kFailed);
  CHECK(crash.reason ==
        "crashed with SIGSEGV (Segmentation fault) during probe in a separate probe process; "
        "not loaded into this one");
  const BackendInfo& exits = backend_named(runtime, "exit_constructor");
  CHECK(exits.status == BackendStatus::kFailed);
  CHECK(exits.reason.starts_with("exited with status 3 during loading (static constructors or the entry point)"));
  CHECK(!is_loaded(misbehaving("crash_probe")));
  CHECK(!is_loaded(misbehaving("exit_constructor")));
  CHECK(runtime.is_available("cpu"));
  CHECK(runtime.devices("cpu").size() >= 1);
}

TEST_CASE("[discovery] isolation: a probe that hangs is killed at the deadline and never loaded here") {
  auto options = options_for({misbehaving("hang_probe"), kPluginDir}, {{"BACKPLANE_PROBE_TIMEOUT_MS", "300"}});
  options.probe_isolation = ProbeIsolation::kProcess;
  Runtime runtime(options);
  const BackendInfo& hang = backend_named(runtime, "hang_probe");
  CHECK(hang.status == BackendStatus::kFailed);
  CHECK(hang.reason ==
        "did not answer within 300 ms during probe in a separate probe process "
        "(BACKPLANE_PROBE_TIMEOUT_MS); the process was killed and the plugin not loaded into this one");
  CHECK(!is_loaded(misbehaving("hang_probe")));
  CHECK(runtime.is_available("cpu"));
}

TEST_CASE("[discovery] BACKPLANE_PROBE_ISOLATION=process turns isolation on; none and junk leave it off") {
  Runtime isolated(options_for({misbehaving("huge_version"), kPluginDir}, {{"BACKPLANE_PROBE_ISOLATION", "process"}}));
  // A plugin that only lies gets the same status and reason as in-process.
  const BackendInfo& huge = backend_named(isolated, "huge_version");
  CHECK(huge.status == BackendStatus::kFailed);
  CHECK(huge.reason.find("version_size 1099511627776 is more than 256 bytes") != std::string::npos);
  CHECK(!is_loaded(misbehaving("huge_version")));
  CHECK(isolated.is_available("cpu"));

  Runtime plain(options_for({misbehaving("huge_version")}, {{"BACKPLANE_PROBE_ISOLATION", "none"}}));
  CHECK(backend_named(plain, "huge_version").reason == huge.reason);
}

TEST_CASE("[discovery] probe_isolation = \"process\" in the config file turns isolation on") {
  KeepSegvInChild keep_segv;
  TempDir dir;
  auto config = dir.write("config.toml", "probe_isolation = \"process\"\n");
  auto options = options_for({misbehaving("crash_probe"), kPluginDir});
  options.config_file = config;
  Runtime runtime(options);
  CHECK(backend_named(runtime, "crash_probe").status == BackendStatus::kFailed);
  CHECK(runtime.is_available("cpu"));
}

TEST_CASE("[config] probe_isolation must be \"process\" or \"none\"") {
  CHECK(backplane::detail::parse_config("probe_isolation = \"none\"\n", "c.toml").probe_isolation ==
        ProbeIsolation::kNone);
  try {
    backplane::detail::parse_config("probe_isolation = \"fork\"\n", "c.toml");
    FAIL("expected an error");
  } catch (const backplane::Error& error) {
    CHECK(std::string(error.what()) == "c.toml:1:19: 'probe_isolation' is 'fork'; expected \"process\" or \"none\"");
  }
  try {
    backplane::detail::parse_config("probe_isolation = true\n", "c.toml");
    FAIL("expected an error");
  } catch (const backplane::Error& error) {
    CHECK(std::string(error.what()) == "c.toml:1:19: 'probe_isolation' must be a string, got boolean");
  }
}

TEST_CASE("[discovery] isolation: a verdict counts only if the helper then exits cleanly") {
  KeepSegvInChild keep_segv;
  auto options = options_for({misbehaving("forge_verdict"), kPluginDir});
  options.probe_isolation = ProbeIsolation::kProcess;
  Runtime runtime(options);
  const BackendInfo& forged = backend_named(runtime, "forge_verdict");
  CHECK(forged.status == BackendStatus::kFailed);
  CHECK(forged.reason ==
        "gave a verdict that is not trusted, since the process then crashed with SIGSEGV (Segmentation fault) "
        "during the probe's end in a separate probe process; not loaded into this one");
  CHECK(!is_loaded(misbehaving("forge_verdict")));
  CHECK(runtime.is_available("cpu"));
}

TEST_CASE("[discovery] isolation: junk on the result pipe is described as such") {
  auto options = options_for({misbehaving("junk_pipe"), kPluginDir});
  options.probe_isolation = ProbeIsolation::kProcess;
  Runtime runtime(options);
  const BackendInfo& junk = backend_named(runtime, "junk_pipe");
  CHECK(junk.status == BackendStatus::kFailed);
  CHECK(junk.reason.starts_with("wrote "));
  CHECK(junk.reason.find("bytes to the probe's result pipe that are not the probe protocol (starting "
                         "\"JJJJ") != std::string::npos);
  CHECK(!is_loaded(misbehaving("junk_pipe")));
}

TEST_CASE("[discovery] isolation: a grandchild holding the pipe neither delays discovery nor outlives it") {
  KeepSegvInChild keep_segv;
  // The probe helper inherits this process's environment, and so does the
  // grandchild it forks: a variable naming this process marks the processes
  // this run started, so that another test run on the machine, with its own
  // grandchild of the same fixture, is not counted.
  const std::string marker = "BP_TEST_ISOLATION_RUN=" + std::to_string(::getpid());
  REQUIRE(::setenv("BP_TEST_ISOLATION_RUN", std::to_string(::getpid()).c_str(), 1) == 0);
  // No deadline: only the helper's own exit may end the wait.
  auto options = options_for({misbehaving("fork_keeps_pipe"), kPluginDir}, {{"BACKPLANE_PROBE_TIMEOUT_MS", "0"}});
  options.probe_isolation = ProbeIsolation::kProcess;
  const auto start = std::chrono::steady_clock::now();
  Runtime runtime(options);
  const BackendInfo& forking = backend_named(runtime, "fork_keeps_pipe");
  const auto took = std::chrono::steady_clock::now() - start;
  CHECK(forking.status == BackendStatus::kFailed);
  CHECK(forking.reason.starts_with("crashed with SIGSEGV"));
  CHECK(took < std::chrono::seconds(20));  // the grandchild sleeps 30 s
  ::unsetenv("BP_TEST_ISOLATION_RUN");
  // Its process group was killed: no process of the fixture that this run
  // started is left (the grandchild's command line is the helper's, naming
  // the fixture's file; its environment holds the marker).
  // SIGKILL is delivered asynchronously, and a killed process is not gone
  // until the kernel has torn down its memory: under ThreadSanitizer, whose
  // shadow mappings are terabytes, on a loaded machine that took longer than
  // 2 s. Allow it 10.
  const auto read_all = [](const std::filesystem::path& path) {
    std::ifstream file(path);
    return std::string((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  };
  const auto survivors = [&] {
    int count = 0;
    for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
      if (read_all(entry.path() / "cmdline").find("backplane-fork_keeps_pipe.so") == std::string::npos) continue;
      // NUL-separated entries: the marker is a whole one.
      if (("\0"s + read_all(entry.path() / "environ") + "\0"s).find("\0"s + marker + "\0"s) == std::string::npos) {
        continue;
      }
      if (is_running(entry.path())) ++count;
    }
    return count;
  };
  for (int attempt = 0; attempt < 200 && survivors() > 0; ++attempt) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  CHECK(survivors() == 0);
}

TEST_CASE("[discovery] isolation: megabytes on stdout and stderr neither block the probe nor hide its verdict") {
  auto options = options_for({misbehaving("loud_output"), kPluginDir});
  options.probe_isolation = ProbeIsolation::kProcess;
  Runtime runtime(options);
  const BackendInfo& loud = backend_named(runtime, "loud_output");
  CHECK(loud.status == BackendStatus::kAvailable);  // the verdict arrived after the noise
}

namespace {

// A stand-in for the probe helper: a script that records each run in
// `marker` and then does `then` (exit 0, sleep...), saying nothing.
std::filesystem::path fake_helper(const TempDir& dir, const std::string& then, mode_t mode) {
  const auto script = dir / "backplane-probe";
  std::ofstream(script) << "#!/bin/sh\necho run >> " << (dir / "runs").string() << "\n" << then << "\n";
  ::chmod(dir.path().c_str(), 0755);
  ::chmod(script.c_str(), mode);
  return script;
}

int runs_of(const TempDir& dir) {
  std::ifstream runs(dir / "runs");
  int count = 0;
  for (std::string line; std::getline(runs, line);) ++count;
  return count;
}

struct HelperOverride {
  explicit HelperOverride(const std::filesystem::path& helper) {
    backplane::detail::isolation::override_helper_for_testing(helper);
  }
  ~HelperOverride() { backplane::detail::isolation::override_helper_for_testing({}); }
};

const std::filesystem::path kFixtureDir = BP_TEST_FIXTURE_DIR;

}  // namespace

TEST_CASE("[discovery] isolation: a probe helper others could replace is never run") {
  TempDir dir;
  const HelperOverride helper(fake_helper(dir, "exit 0", 0777));  // world-writable
  // A fresh copy of the cpu plugin: one this process has not seen pass yet.
  TempDir plugins;
  std::filesystem::copy_file(kPluginDir / "backplane-cpu.so", plugins / "backplane-cpu.so");
  auto options = options_for({plugins / "backplane-cpu.so"});
  options.probe_isolation = ProbeIsolation::kProcess;
  Runtime runtime(options);
  CHECK(runtime.is_available("cpu"));  // probed here instead, with a warning
  CHECK(runs_of(dir) == 0);
}

TEST_CASE("[discovery] isolation: a helper that says nothing is a broken helper, not every plugin failing") {
  for (const char* then : {"exit 0", "exec sleep 30"}) {
    CAPTURE(then);
    TempDir dir;
    const HelperOverride helper(fake_helper(dir, then, 0755));
    TempDir plugins;  // fresh copies: files this process has not seen pass yet
    std::filesystem::copy_file(kPluginDir / "backplane-cpu.so", plugins / "backplane-cpu.so");
    std::filesystem::copy_file(kFixtureDir / "backplane-unavailable.so", plugins / "backplane-unavailable.so");
    auto options = options_for({plugins.path()}, {{"BACKPLANE_PROBE_TIMEOUT_MS", "2000"}});
    options.probe_isolation = ProbeIsolation::kProcess;
    Runtime runtime(options);
    CHECK(runtime.is_available("cpu"));
    CHECK(backend_named(runtime, "unavailable").status == BackendStatus::kUnavailable);
    CHECK(runs_of(dir) == 1);  // found broken once; the rest are probed here
  }
}
