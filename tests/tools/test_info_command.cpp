// `backplane info` as a user runs it: the real binary, the real environment.
#include "support/process_running.hpp"
#include "support/run_command.hpp"
#include "support/temp_dir.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

using backplane::testing::is_running;
using backplane::testing::run_command;
using backplane::testing::TempDir;
using nlohmann::json;

namespace {

const std::string kTool = BP_TEST_TOOL;
const std::string kFixtureDir = BP_TEST_FIXTURE_DIR;

// The tool with a clean backplane environment (no launcher's local rank
// either, as when the tests run inside a Slurm job, no PJRT libraries, and
// no Python interpreter asked for packages) plus `variables`.
std::string tool(const std::string& variables, const std::string& args) {
  return "env -u BACKPLANE_PLUGIN_PATH -u BACKPLANE_CONFIG -u BACKPLANE_BACKENDS -u BACKPLANE_DEFAULT_DEVICE "
         "-u BACKPLANE_LOG -u BACKPLANE_PROBE_ISOLATION -u BACKPLANE_PROBE_TIMEOUT_MS -u LOCAL_RANK -u "
         "OMPI_COMM_WORLD_LOCAL_RANK -u SLURM_LOCALID -u PJRT_NAMES_AND_LIBRARY_PATHS " +
         variables + (variables.find("BACKPLANE_PYTHON=") == std::string::npos ? " BACKPLANE_PYTHON= " : " ") + kTool +
         " " + args;
}

const json* find_backend(const json& info, const std::string& name, const std::string& status) {
  for (const auto& backend : info["backends"]) {
    if (backend["name"] == name && backend["status"] == status) return &backend;
  }
  return nullptr;
}

}  // namespace

TEST_CASE("[cli] info --json lists cpu as available with its device") {
  auto result = run_command(tool("", "info --json"));
  REQUIRE(result.exit_status == 0);
  json info = json::parse(result.output);
  CHECK(info["abi_version"] == "1.4");
  const json* cpu = find_backend(info, "cpu", "available");
  REQUIRE(cpu != nullptr);
  REQUIRE((*cpu)["devices"].size() >= 1);
  CHECK((*cpu)["devices"][0]["selector"] == "cpu:0");
  CHECK((*cpu)["devices"][0]["memory_total"].get<std::uint64_t>() > 0);
  CHECK((*cpu)["origin"] == "next to core");
  CHECK((*cpu)["capabilities"] == json::array({"host_addressable", "pinned_host", "wrap_memory"}));
  CHECK((*cpu)["dlpack_device_type"] == 1);  // kDLCPU, as the plugin declares it
  CHECK((*cpu)["devices"][0]["memory_kinds"] == json::array({"host"}));
  CHECK((*cpu)["origin_detail"] == "");
  CHECK((*cpu)["library"] == "");
  CHECK(info["python"]["interpreter"].is_null());
  CHECK(info["python"]["note"] == "not asked: BACKPLANE_PYTHON is empty");
}

TEST_CASE("[cli] info --json shows every fixture plugin with its status, next to a working cpu") {
  auto result = run_command(tool("BACKPLANE_PLUGIN_PATH=" + kFixtureDir, "info --json"));
  REQUIRE(result.exit_status == 0);
  json info = json::parse(result.output);
  CHECK(info["search_path"][0]["path"] == kFixtureDir);
  CHECK(info["search_path"][0]["origin"] == "BACKPLANE_PLUGIN_PATH");
  CHECK(find_backend(info, "cpu", "available") != nullptr);
  CHECK(find_backend(info, "sim", "available") != nullptr);
  CHECK(find_backend(info, "too_new", "incompatible") != nullptr);
  CHECK(find_backend(info, "no_entry", "failed") != nullptr);
  CHECK(find_backend(info, "unavailable", "unavailable") != nullptr);
  CHECK(find_backend(info, "probe_error", "failed") != nullptr);
}

TEST_CASE("[cli] info prints statuses and reasons as text") {
  auto result = run_command(tool("BACKPLANE_PLUGIN_PATH=" + kFixtureDir, "info"));
  REQUIRE(result.exit_status == 0);
  CHECK(result.output.find("plugin search path:") != std::string::npos);
  CHECK(result.output.find("incompatible") != std::string::npos);
  CHECK(result.output.find("plugin speaks ABI 2.0, this core speaks 1.x") != std::string::npos);
  CHECK(result.output.find("cpu:0") != std::string::npos);
}

TEST_CASE("[cli] BACKPLANE_LOG=debug says why each file was taken or skipped") {
  auto result = run_command(tool("BACKPLANE_LOG=debug BACKPLANE_PLUGIN_PATH=" + kFixtureDir, "info 2>&1 >/dev/null"));
  REQUIRE(result.exit_status == 0);
  CHECK(result.output.find("backplane: debug:") != std::string::npos);
  CHECK(result.output.find("backplane-too_new.so: taken") != std::string::npos);
  CHECK(result.output.find("skipped (not named backplane-<name>.so)") != std::string::npos);
}

TEST_CASE("[cli] an unknown option or command is a usage error") {
  auto bad_option = run_command(tool("", "info --yaml 2>&1"));
  CHECK(bad_option.exit_status == 2);
  CHECK(bad_option.output.find("unknown option '--yaml'") != std::string::npos);
  auto bad_command = run_command(tool("", "infos 2>&1"));
  CHECK(bad_command.exit_status == 2);
  CHECK(bad_command.output.find("unknown command 'infos'") != std::string::npos);
}

TEST_CASE("[cli] a config with [backend.cpu] devices = 4 makes info list cpu:0..cpu:3") {
  auto config = std::filesystem::temp_directory_path() / "backplane-test-cli-devices.toml";
  { std::ofstream(config) << "[backend.cpu]\ndevices = 4\n"; }
  auto result = run_command(tool("BACKPLANE_CONFIG=" + config.string(), "info --json"));
  std::filesystem::remove(config);
  REQUIRE(result.exit_status == 0);
  json info = json::parse(result.output);
  CHECK(info["config"]["path"] == config.string());
  const json* cpu = find_backend(info, "cpu", "available");
  REQUIRE(cpu != nullptr);
  REQUIRE((*cpu)["devices"].size() == 4);
  CHECK((*cpu)["devices"][3]["selector"] == "cpu:3");
}

// The fixture directory's sim plugin, configured by `sim_config`.
struct SimInfo {
  std::string text;
  json devices;
};

SimInfo sim_info(const std::string& sim_config) {
  auto config = std::filesystem::temp_directory_path() / "backplane-test-cli-memory.toml";
  { std::ofstream(config) << "[backend.sim]\n" << sim_config; }
  const std::string variables = "BACKPLANE_CONFIG=" + config.string() + " BACKPLANE_PLUGIN_PATH=" + kFixtureDir;
  auto text = run_command(tool(variables, "info"));
  auto as_json = run_command(tool(variables, "info --json"));
  std::filesystem::remove(config);
  REQUIRE(text.exit_status == 0);
  REQUIRE(as_json.exit_status == 0);
  const json info = json::parse(as_json.output);
  const json* sim = find_backend(info, "sim", "available");
  REQUIRE(sim != nullptr);
  return {text.output, (*sim)["devices"]};
}

TEST_CASE("[cli] info shows each device's total and free memory, and says when free is unknown") {
  const SimInfo known = sim_info("memory_limit = 1048576\n");
  CHECK(known.text.find("sim:0") != std::string::npos);
  CHECK(known.text.find("1.0 MiB free of 1.0 MiB") != std::string::npos);
  CHECK(known.devices[0]["memory_total"] == 1048576);
  CHECK(known.devices[0]["memory_free"] == 1048576);

  const SimInfo unknown = sim_info("memory_limit = 65536\nreport_free = 0\n");
  CHECK(unknown.text.find("unknown free of 64.0 KiB") != std::string::npos);
  CHECK(unknown.devices[0]["memory_total"] == 65536);
  CHECK(unknown.devices[0]["memory_free"].is_null());
}

TEST_CASE("[cli] info --json gives cpu:0 the host's total memory and a free figure below it") {
  auto result = run_command(tool("", "info --json"));
  REQUIRE(result.exit_status == 0);
  const json info = json::parse(result.output);
  const json* cpu = find_backend(info, "cpu", "available");
  REQUIRE(cpu != nullptr);
  const json& device = (*cpu)["devices"][0];
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  std::uint64_t kib = 0;
  std::string unit;
  while (meminfo >> key >> kib >> unit) {
    if (key == "MemTotal:") CHECK(device["memory_total"].get<std::uint64_t>() == kib * 1024);
  }
  REQUIRE(device["memory_free"].is_number_unsigned());
  CHECK(device["memory_free"].get<std::uint64_t>() > 0);
  CHECK(device["memory_free"].get<std::uint64_t>() <= device["memory_total"].get<std::uint64_t>());
}

TEST_CASE("[cli] info shows the default device and the source that decided it") {
  auto automatic = run_command(tool("", "info"));
  CHECK(automatic.output.find("default device: cpu:0 (highest-priority available backend)") != std::string::npos);
  auto from_environment = run_command(tool("BACKPLANE_DEFAULT_DEVICE=cpu:0", "info"));
  CHECK(from_environment.output.find("default device: cpu:0 (BACKPLANE_DEFAULT_DEVICE)") != std::string::npos);
  auto as_json = run_command(tool("BACKPLANE_DEFAULT_DEVICE=cpu", "info --json"));
  json info = json::parse(as_json.output);
  CHECK(info["default_device"]["selector"] == "cpu:0");
  CHECK(info["default_device"]["source"] == "BACKPLANE_DEFAULT_DEVICE");
}

TEST_CASE("[cli] info names the launcher's local rank when it picked the default device") {
  auto config = std::filesystem::temp_directory_path() / "backplane-test-cli-local-rank.toml";
  { std::ofstream(config) << "[backend.cpu]\ndevices = 2\n[backend.cuda]\nenabled = false\n"; }
  const std::string variables = "BACKPLANE_CONFIG=" + config.string() + " LOCAL_RANK=3";
  auto text = run_command(tool(variables, "info"));
  auto as_json = run_command(tool(variables, "info --json"));
  std::filesystem::remove(config);
  CHECK(text.output.find("default device: cpu:1 (LOCAL_RANK=3)") != std::string::npos);
  json info = json::parse(as_json.output);
  CHECK(info["default_device"]["selector"] == "cpu:1");
  CHECK(info["default_device"]["source"] == "local rank");
  CHECK(info["default_device"]["description"] == "LOCAL_RANK=3");
}

TEST_CASE("[cli] a default device that cannot be used is reported, with the backends that exist") {
  auto result = run_command(tool("BACKPLANE_DEFAULT_DEVICE=cdua", "info"));
  REQUIRE(result.exit_status == 0);  // info still shows everything else
  CHECK(result.output.find("default device: none: default device from BACKPLANE_DEFAULT_DEVICE=cdua: "
                           "no backend 'cdua'; backends: cpu (available)") != std::string::npos);
}

TEST_CASE("[cli] BACKPLANE_CONFIG naming a missing file is an error, not a silent default") {
  auto result = run_command(tool("BACKPLANE_CONFIG=/nonexistent/backplane.toml", "info 2>&1"));
  CHECK(result.exit_status == 1);
  CHECK(result.output.find("BACKPLANE_CONFIG") != std::string::npos);
  CHECK(result.output.find("/nonexistent/backplane.toml") != std::string::npos);
}

TEST_CASE("[cli] info shows which config file was used, or where it looked") {
  auto none = run_command(tool("XDG_CONFIG_HOME=/nonexistent-xdg", "info"));
  CHECK(none.output.find("config file: none found (looked at /nonexistent-xdg/backplane/config.toml") !=
        std::string::npos);
}

TEST_CASE("[cli] info --json replaces bytes that are not UTF-8 and keeps the rest of the document") {
  char pattern[] = "/tmp/backplane-cli-XXXXXX";
  REQUIRE(::mkdtemp(pattern) != nullptr);
  const std::filesystem::path directory = pattern;
  std::ofstream(directory / "backplane-bad\xff\xfe.so") << "not a plugin";
  const std::string home = directory.string() + "/home-\xff";
  auto result = run_command(
      tool("-u XDG_CONFIG_HOME HOME='" + home + "' BACKPLANE_PLUGIN_PATH=" + directory.string(), "info --json 2>&1"));
  std::filesystem::remove_all(directory);
  CHECK(result.exit_status == 0);
  json info = json::parse(result.output);
  const json* junk = find_backend(info, "bad\xEF\xBF\xBD\xEF\xBF\xBD", "failed");
  REQUIRE(junk != nullptr);
  CHECK((*junk)["plugin"] == directory.string() + "/backplane-bad\xEF\xBF\xBD\xEF\xBF\xBD.so");
  CHECK(find_backend(info, "cpu", "available") != nullptr);
  CHECK(info["config"]["searched"].dump().find("home-\xEF\xBF\xBD") != std::string::npos);
}

TEST_CASE("[cli] a FIFO named like a plugin is listed as failed at once; the other backends work") {
  char pattern[] = "/tmp/backplane-cli-XXXXXX";
  REQUIRE(::mkdtemp(pattern) != nullptr);
  const std::filesystem::path directory = pattern;
  std::filesystem::permissions(directory, std::filesystem::perms::owner_all);
  REQUIRE(::mkfifo((directory / "backplane-pipe.so").c_str(), 0600) == 0);
  // `timeout`: without the check dlopen() waits for a writer forever (status 124).
  auto result = run_command("timeout 20 " + tool("BACKPLANE_PLUGIN_PATH=" + directory.string(), "info --json"));
  std::filesystem::remove_all(directory);
  REQUIRE(result.exit_status == 0);
  json info = json::parse(result.output);
  const json* pipe = find_backend(info, "pipe", "failed");
  REQUIRE(pipe != nullptr);
  CHECK((*pipe)["reason"] == "refused: " + (directory / "backplane-pipe.so").string() +
                                 " is a FIFO (named pipe), not a regular file (a plugin is a shared library)");
  CHECK(find_backend(info, "cpu", "available") != nullptr);
}

TEST_CASE("[cli] info asks BACKPLANE_PYTHON for its sys.path and lists the plugin wheels installed there") {
  TempDir dir;
  const auto site = dir / "site";
  dir.write("site/vendor-1.5.dist-info/METADATA", "Name: vendor\nVersion: 1.5\n");
  dir.write("site/vendor-1.5.dist-info/entry_points.txt",
            "[backplane.plugins]\nvendor = vendor_pkg\ngone = gone_pkg\n");
  std::filesystem::create_directories(site / "vendor_pkg");
  std::filesystem::copy_file(kFixtureDir + "/backplane-unavailable.so", site / "vendor_pkg/backplane-unavailable.so");
  // A stand-in interpreter: prints its sys.path, as `python3 -c ...` would.
  const auto python = dir.write("python", "#!/bin/sh\necho " + site.string() + "\necho /no/such/dir\n");
  std::filesystem::permissions(python, std::filesystem::perms::owner_all);
  const std::string variables = "BACKPLANE_PYTHON=" + python.string();

  auto as_json = run_command(tool(variables, "info --json"));
  REQUIRE(as_json.exit_status == 0);
  const json info = json::parse(as_json.output);
  CHECK(info["python"]["interpreter"] == python.string());
  CHECK(info["python"]["paths"] == json::array({site.string(), "/no/such/dir"}));
  const json* vendor = find_backend(info, "unavailable", "unavailable");
  REQUIRE(vendor != nullptr);
  CHECK((*vendor)["origin"] == "package");
  CHECK((*vendor)["origin_detail"] == "vendor 1.5 (entry point backplane.plugins:vendor)");
  const json* gone = find_backend(info, "gone", "failed");
  REQUIRE(gone != nullptr);
  CHECK((*gone)["reason"].get<std::string>().find("package gone_pkg is not installed") != std::string::npos);

  auto text = run_command(tool(variables, "info"));
  CHECK(text.output.find("python packages: asked " + python.string() + ": 2 directories") != std::string::npos);
  CHECK(text.output.find("from: vendor 1.5 (entry point backplane.plugins:vendor)") != std::string::npos);

  auto missing = run_command(tool("BACKPLANE_PYTHON=/no/such/python", "info"));
  CHECK(missing.exit_status == 0);
  CHECK(missing.output.find("python packages: cannot run /no/such/python: No such file or directory") !=
        std::string::npos);
}

TEST_CASE("[cli] info prints text from wheels and plugins escaped: no terminal escape or forged line gets through") {
  TempDir dir;
  const auto site = dir / "site";
  // A wheel whose METADATA names itself with a terminal escape (clear the
  // screen) and a byte that is not UTF-8.
  dir.write("site/vendor-1.5.dist-info/METADATA", "Name: ven\x1b[2Jdor\xff\nVersion: 1.5\n");
  dir.write("site/vendor-1.5.dist-info/entry_points.txt", "[backplane.plugins]\nvendor = vendor_pkg\n");
  std::filesystem::create_directories(site / "vendor_pkg");
  std::filesystem::copy_file(kFixtureDir + "/backplane-unavailable.so", site / "vendor_pkg/backplane-unavailable.so");
  const auto python = dir.write("python", "#!/bin/sh\necho " + site.string() + "\n");
  std::filesystem::permissions(python, std::filesystem::perms::owner_all);

  auto text = run_command(tool("BACKPLANE_PYTHON=" + python.string(), "info"));
  REQUIRE(text.exit_status == 0);
  CHECK(text.output.find('\x1b') == std::string::npos);
  CHECK(text.output.find('\xff') == std::string::npos);
  CHECK_MESSAGE(text.output.find(R"x(from: "ven\x1b[2Jdor\xff 1.5 (entry point backplane.plugins:vendor)")x") !=
                    std::string::npos,
                text.output);
}

TEST_CASE("[cli] info's time limit bounds the whole exchange with the interpreter, which never outlives it") {
  TempDir dir;
  const auto site = dir / "site";
  std::filesystem::create_directories(site);
  const auto stand_in = [&](const std::string& name, const std::string& script) {
    const auto path = dir.write(name, "#!/bin/sh\n" + script);
    std::filesystem::permissions(path, std::filesystem::perms::owner_all);
    return path;
  };
  const auto ask = [&](const std::filesystem::path& python) {
    auto result = run_command(tool("BACKPLANE_PYTHON=" + python.string(), "info --json"));
    REQUIRE(result.exit_status == 0);
    return json::parse(result.output)["python"];
  };
  // Answers, exits, and leaves a process that holds the pipe for 30 s: the
  // answer counts, and that process is killed with the interpreter's group.
  const auto leaves_child =
      stand_in("leaves_child", "echo " + site.string() + "\nsleep 30 &\necho $! > " + (dir / "child").string() + "\n");
  const json answered = ask(leaves_child);
  CHECK(answered["note"] == "asked " + leaves_child.string() + ": 1 directories");
  CHECK(answered["paths"] == json::array({site.string()}));
  std::ifstream child_file(dir / "child");
  int child = 0;
  child_file >> child;
  REQUIRE(child > 0);
  // Killed, then reaped by init (a zombie until then): no longer running.
  const std::filesystem::path child_entry = "/proc/" + std::to_string(child);
  for (int attempt = 0; attempt < 200 && is_running(child_entry); ++attempt) ::usleep(50'000);
  CHECK_FALSE(is_running(child_entry));

  // Closes its stdout after answering and lives on: killed at the limit.
  const auto lives_on = stand_in("lives_on", "echo " + site.string() + "\nexec >&-\nsleep 30\n");
  CHECK(ask(lives_on)["note"] ==
        lives_on.string() + " did not answer and exit within 3000 ms; killed; no Python packages listed");

  // More than 1 MiB of answer: named as such, not as a failed exit.
  const auto too_long = stand_in("too_long", "head -c 2000000 /dev/zero | tr '\\0' 'x'\n");
  CHECK(ask(too_long)["note"] ==
        too_long.string() + " answered more than 1048576 bytes of sys.path; killed; no Python packages listed");
}

TEST_CASE("[cli] info lists PJRT_NAMES_AND_LIBRARY_PATHS, warning about a malformed entry with the config's") {
  auto result = run_command(tool("PJRT_NAMES_AND_LIBRARY_PATHS=cpu:/no/such/lib.so,broken", "info"));
  REQUIRE(result.exit_status == 0);
  CHECK(result.output.find("warning: PJRT_NAMES_AND_LIBRARY_PATHS: entry 'broken' ignored") != std::string::npos);
  CHECK(result.output.find("pjrt_cpu") != std::string::npos);
  CHECK(result.output.find("library: /no/such/lib.so") != std::string::npos);
  CHECK(result.output.find("from: PJRT_NAMES_AND_LIBRARY_PATHS") != std::string::npos);
}
