// BP_CAPABILITY_PROBE_IN_CHILD: a plugin whose probe makes device state is
// always probed in the probe helper, and in the caller only backend_create
// runs until a device is used. The fixture (tests/plugins/probe_in_child)
// writes "<call> <pid>" for each call to the file its option pid_log names.
#include "support/backend_named.hpp"
#include "support/temp_dir.hpp"

#include "isolation/probe_process.hpp"

#include <backplane/plugin.h>
#include <backplane/array.hpp>
#include <backplane/backplane.hpp>

#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

using backplane::BackendInfo;
using backplane::BackendStatus;
using backplane::Device;
using backplane::ProbeIsolation;
using backplane::Runtime;
using backplane::testing::backend_named;
using backplane::testing::TempDir;

namespace {

const std::filesystem::path kPlugin = std::filesystem::path(BP_TEST_PROBE_IN_CHILD_DIR) / "backplane-child_probe.so";

struct Call {
  std::string name;
  bool here;  // made in this process
};

std::vector<Call> calls_in(const std::filesystem::path& log) {
  std::vector<Call> calls;
  std::ifstream file(log);
  std::string name;
  long pid = 0;
  while (file >> name >> pid) calls.push_back({name, pid == static_cast<long>(::getpid())});
  return calls;
}

int count(const std::vector<Call>& calls, std::string_view name, bool here) {
  int found = 0;
  for (const Call& call : calls) found += call.name == name && call.here == here ? 1 : 0;
  return found;
}

Runtime::Options options_for(const TempDir& dir, ProbeIsolation isolation) {
  Runtime::Options options;
  options.plugin_paths = {kPlugin};
  options.ignore_environment = true;
  options.skip_default_paths = true;
  options.probe_isolation = isolation;
  options.backend_options["child_probe"] = {{"pid_log", (dir / "calls").string()}, {"devices", "2"}};
  return options;
}

struct HelperOverride {
  explicit HelperOverride(const std::filesystem::path& helper) {
    backplane::detail::isolation::override_helper_for_testing(helper);
  }
  ~HelperOverride() { backplane::detail::isolation::override_helper_for_testing(std::nullopt); }
};

}  // namespace

TEST_CASE("[probe in child] probed in the helper whatever the isolation; here only backend_create until first use") {
  for (const ProbeIsolation isolation : {ProbeIsolation::kNone, ProbeIsolation::kProcess}) {
    CAPTURE(backplane::to_string(isolation));
    TempDir dir;
    Runtime runtime(options_for(dir, isolation));
    const BackendInfo& info = backend_named(runtime, "child_probe");
    REQUIRE(info.status == BackendStatus::kAvailable);
    CHECK((info.capabilities & BP_CAPABILITY_PROBE_IN_CHILD) != 0);
    CHECK((info.capabilities & BP_CAPABILITY_HOST_ADDRESSABLE) != 0);
    CHECK(info.dlpack_device_type == 1);
    // The device list is the child's, memory kinds included.
    const auto devices = runtime.devices("child_probe");
    REQUIRE(devices.size() == 2);
    CHECK(devices[1].selector() == "child_probe:1");
    CHECK(devices[1].memory_kinds == std::vector<std::string>{"host"});
    CHECK(devices[0].memory_total > 0);

    auto calls = calls_in(dir / "calls");
    CHECK(count(calls, "probe", false) >= 1);
    CHECK(count(calls, "device_info", false) >= 2);
    CHECK(count(calls, "backend_create", true) == 1);
    CHECK(count(calls, "probe", true) == 0);
    CHECK(count(calls, "device_count", true) == 0);
    CHECK(count(calls, "device_info", true) == 0);

    // First use: the device is the plugin's from now on, in this process.
    const std::vector<float> values = {1, 2, 3, 4};
    const auto array =
        backplane::Array::from_host(runtime, Device{"child_probe", 1}, backplane::DType::kF32, {4}, values.data(), 16);
    CHECK(array.to_vector<float>() == values);
    runtime.devices("child_probe");
    calls = calls_in(dir / "calls");
    CHECK(count(calls, "memory_allocate", true) >= 1);
    CHECK(count(calls, "device_info", true) >= 1);  // live figures after first use
    CHECK(count(calls, "backend_create", true) == 1);
  }
}

TEST_CASE("[probe in child] with no helper installed, or a broken one, the plugin is failed and never probed here") {
  TempDir dir;
  {
    const HelperOverride none(std::filesystem::path{});
    Runtime runtime(options_for(dir, ProbeIsolation::kNone));
    const BackendInfo& info = backend_named(runtime, "child_probe");
    CHECK(info.status == BackendStatus::kFailed);
    CHECK(info.reason ==
          "its table declares BP_CAPABILITY_PROBE_IN_CHILD (probing makes device state), and it is probed only in the "
          "probe helper backplane-probe, which is not installed next to the core library (backplane/backplane-probe) "
          "nor in the install's libdir");
  }
  {
    const HelperOverride missing(dir / "no-such-helper");
    Runtime runtime(options_for(dir, ProbeIsolation::kNone));
    const BackendInfo& info = backend_named(runtime, "child_probe");
    CHECK(info.status == BackendStatus::kFailed);
    CHECK(
        info.reason.starts_with("its table declares BP_CAPABILITY_PROBE_IN_CHILD, and it is probed only in the probe "
                                "helper, which is broken: cannot start " +
                                (dir / "no-such-helper").string()));
  }
  {
    const auto silent = dir.write("silent-helper", "#!/bin/sh\nexit 0\n");
    ::chmod(dir.path().c_str(), 0755);
    ::chmod(silent.c_str(), 0755);
    const HelperOverride broken(silent);
    Runtime runtime(options_for(dir, ProbeIsolation::kNone));
    const BackendInfo& info = backend_named(runtime, "child_probe");
    CHECK(info.status == BackendStatus::kFailed);
    CHECK(info.reason.find("which is broken: " + silent.string() + " wrote nothing to its result pipe") !=
          std::string::npos);
  }
  for (const Call& call : calls_in(dir / "calls")) {
    CAPTURE(call.name);
    CHECK((!call.here || call.name == "backend_create"));
  }
  CHECK(count(calls_in(dir / "calls"), "probe", true) == 0);
}

TEST_CASE("[probe in child] a probe failing in the child is failed, with the child's reason") {
  TempDir dir;
  auto options = options_for(dir, ProbeIsolation::kNone);
  options.backend_options["child_probe"] = {{"pid_log", (dir / "calls").string()}, {"devices", "0"}};  // 1..64 only
  Runtime runtime(options);
  const BackendInfo& info = backend_named(runtime, "child_probe");
  CHECK(info.status == BackendStatus::kFailed);
  CHECK(info.reason.find("devices") != std::string::npos);
  CHECK(count(calls_in(dir / "calls"), "backend_create", true) == 0);
}
