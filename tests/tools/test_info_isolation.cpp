// `backplane info` and `backplane conformance` probe plugins in a separate
// process by default: a plugin that crashes, exits or hangs while loading,
// in backend_create or in probe is listed `failed` with what happened, and
// the tool itself carries on.
#include "support/run_command.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>

using backplane::testing::run_command;
using nlohmann::json;

namespace {

const std::string kTool = BP_TEST_TOOL;
const std::filesystem::path kMisbehavingDir = BP_TEST_MISBEHAVING_DIR;

// A clean backplane environment plus `variables`. A sanitizer's SIGSEGV
// handler would turn the crash into an exit: the child keeps the signal.
std::string tool(const std::string& variables, const std::string& args) {
  return "env -u BACKPLANE_PLUGIN_PATH -u BACKPLANE_CONFIG -u BACKPLANE_BACKENDS -u BACKPLANE_DEFAULT_DEVICE "
         "-u BACKPLANE_LOG -u BACKPLANE_PROBE_ISOLATION -u BACKPLANE_PROBE_TIMEOUT_MS -u PJRT_NAMES_AND_LIBRARY_PATHS "
         "BACKPLANE_PYTHON= "
         "ASAN_OPTIONS=\"$ASAN_OPTIONS:handle_segv=0:handle_abort=0\" TSAN_OPTIONS=\"$TSAN_OPTIONS:handle_segv=0\" " +
         variables + " " + kTool + " " + args + " 2>/dev/null";
}

std::string misbehaving_path() {
  std::string path;
  for (const char* name : {"crash_probe", "exit_constructor", "sleep_constructor"}) {
    path += (path.empty() ? "" : ":") + (kMisbehavingDir / (std::string("backplane-") + name + ".so")).string();
  }
  return path;
}

const json* find_backend(const json& info, const std::string& name) {
  for (const auto& backend : info["backends"]) {
    if (backend["name"] == name) return &backend;
  }
  return nullptr;
}

}  // namespace

TEST_CASE("[cli] info lists plugins that crash, exit or hang as failed, and cpu as available") {
  // `timeout`: a tool that waited for the sleeping constructor would take 60 s.
  auto result =
      run_command("timeout 50 " +
                  tool("BACKPLANE_PROBE_TIMEOUT_MS=2000 BACKPLANE_PLUGIN_PATH=" + misbehaving_path(), "info --json"));
  REQUIRE(result.exit_status == 0);
  json info = json::parse(result.output);

  const json* crash = find_backend(info, "crash_probe");
  REQUIRE(crash != nullptr);
  CHECK((*crash)["status"] == "failed");
  CHECK((*crash)["reason"] ==
        "crashed with SIGSEGV (Segmentation fault) during probe in a separate probe process; not loaded into "
        "this one");

  const json* exits = find_backend(info, "exit_constructor");
  REQUIRE(exits != nullptr);
  CHECK((*exits)["status"] == "failed");
  CHECK((*exits)["reason"] ==
        "exited with status 3 during loading (static constructors or the entry point) in a separate probe "
        "process; not loaded into this one");

  const json* sleeps = find_backend(info, "sleep_constructor");
  REQUIRE(sleeps != nullptr);
  CHECK((*sleeps)["status"] == "failed");
  CHECK((*sleeps)["reason"] ==
        "did not answer within 2000 ms during loading (static constructors or the entry point) in a separate "
        "probe process (BACKPLANE_PROBE_TIMEOUT_MS); the process was killed and the plugin not loaded into "
        "this one");

  const json* cpu = find_backend(info, "cpu");
  REQUIRE(cpu != nullptr);
  CHECK((*cpu)["status"] == "available");
  CHECK((*cpu)["devices"].size() >= 1);
  CHECK(info["default_device"]["selector"] == "cpu:0");
}

TEST_CASE("[cli] info as text names the signal, and good plugins keep their own statuses") {
  auto result = run_command(tool(
      "BACKPLANE_PLUGIN_PATH=" + (kMisbehavingDir / "backplane-crash_probe.so").string() + ":" + BP_TEST_FIXTURE_DIR,
      "info"));
  REQUIRE(result.exit_status == 0);
  CHECK(result.output.find("crashed with SIGSEGV (Segmentation fault) during probe") != std::string::npos);
  CHECK(result.output.find("fixture: no such hardware") != std::string::npos);  // the unavailable fixture
  CHECK(result.output.find("cpu:0") != std::string::npos);                      // the cpu device is listed
}

TEST_CASE("[cli] BACKPLANE_PROBE_ISOLATION=none probes in the tool's own process") {
  // The exiting constructor then ends the tool itself, with its status.
  auto result = run_command(tool("BACKPLANE_PROBE_ISOLATION=none BACKPLANE_PLUGIN_PATH=" +
                                     (kMisbehavingDir / "backplane-exit_constructor.so").string(),
                                 "info --json"));
  CHECK(result.exit_status == 3);
  CHECK(result.output.empty());
}

TEST_CASE("[cli] conformance on a plugin that crashes in probe fails the isolation check and survives") {
  auto result = run_command(tool("", "conformance " + (kMisbehavingDir / "backplane-crash_probe.so").string()));
  CHECK(result.exit_status == 1);
  CHECK(result.output.find("FAIL  isolation: loads, creates and probes in a separate process  [crashed with "
                           "SIGSEGV (Segmentation fault) during probe") != std::string::npos);
  CHECK(result.output.find("summary: 1 checks: 0 passed, 1 failed, 0 n/a; not loaded: DOES NOT CONFORM") !=
        std::string::npos);
}

TEST_CASE("[cli] conformance of a good plugin passes the isolation check first") {
  auto result = run_command(tool("", "conformance " + std::string(BP_TEST_PLUGIN_DIR) + "/backplane-cpu.so"));
  CHECK(result.exit_status == 0);
  CHECK(result.output.find("pass  isolation: loads, creates and probes in a separate process  [available") !=
        std::string::npos);
}
