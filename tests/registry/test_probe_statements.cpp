// ABI 1.4 in discovery: what a probe states about its backend (capabilities,
// DLPack device type) is checked by the table's rules and used everywhere;
// a plugin of an older minor, which never writes those fields, keeps its
// table's; each device lists its memory kinds.
#include "support/backend_named.hpp"

#include <backplane/plugin.h>
#include <backplane/backplane.hpp>

#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <vector>

using backplane::BackendInfo;
using backplane::BackendStatus;
using backplane::Runtime;
using backplane::testing::backend_named;

namespace {

const std::filesystem::path kPluginDir = BP_TEST_PLUGIN_DIR;
const std::filesystem::path kFixtureDir = BP_TEST_FIXTURE_DIR;

Runtime::Options isolated(std::vector<std::filesystem::path> paths) {
  Runtime::Options options;
  options.plugin_paths = std::move(paths);
  options.ignore_environment = true;
  options.skip_default_paths = true;
  return options;
}

Runtime::Options sim_stating(std::string dlpack_device_type) {
  auto options = isolated({kFixtureDir / "backplane-sim.so"});
  options.backend_options["sim"] = {{"stated_dlpack_device_type", std::move(dlpack_device_type)}};
  return options;
}

}  // namespace

TEST_CASE("[discovery] plugins of ABI 1.0 and 1.1 never write the 1.4 probe fields: they keep their table's") {
  for (const char* directory : {BP_TEST_ABI_1_0_DIR, BP_TEST_ABI_1_1_DIR}) {
    CAPTURE(directory);
    Runtime runtime(isolated({directory}));
    const BackendInfo& cpu = backend_named(runtime, "cpu");
    REQUIRE(cpu.status == BackendStatus::kAvailable);
    const bool wraps = std::string(directory) == BP_TEST_ABI_1_1_DIR;
    CHECK(cpu.capabilities ==
          (BP_CAPABILITY_HOST_ADDRESSABLE | BP_CAPABILITY_PINNED_HOST | (wraps ? BP_CAPABILITY_WRAP_MEMORY : 0)));
    CHECK(cpu.dlpack_device_type == 0);  // its table ends before the field
    CHECK(runtime.devices("cpu")[0].memory_kinds == std::vector<std::string>{"host"});
  }
  // A 1.4 fixture whose probe writes none of them keeps its table's too.
  Runtime fixtures(isolated({kFixtureDir}));
  const BackendInfo& unavailable = backend_named(fixtures, "unavailable");
  CHECK(unavailable.capabilities == 0);
  CHECK(unavailable.dlpack_device_type == 0);
}

TEST_CASE("[discovery] a DLPack type the probe states is the backend's; a bad one fails it, naming the field") {
  Runtime stated(sim_stating("7"));
  const BackendInfo& sim = backend_named(stated, "sim");
  REQUIRE(sim.status == BackendStatus::kAvailable);
  CHECK(sim.dlpack_device_type == 7);

  Runtime cpu_type(sim_stating("1"));
  const BackendInfo& wrong = backend_named(cpu_type, "sim");
  CHECK(wrong.status == BackendStatus::kFailed);
  CHECK(wrong.reason ==
        "probe failed (plugin error): probe answered BP_ProbeArgs.dlpack_device_type 1 (kDLCPU), but its "
        "BP_ProbeArgs.capabilities (0x16) lack BP_CAPABILITY_HOST_ADDRESSABLE: kDLCPU memory must be host memory");

  Runtime negative(sim_stating("-3"));
  CHECK(backend_named(negative, "sim").reason ==
        "probe failed (plugin error): probe answered BP_ProbeArgs.dlpack_device_type -3; it must be 0 (not declared) "
        "or a DLPack device type");
}

TEST_CASE("[discovery] memory kinds: as the plugin states them, else derived from its capabilities") {
  Runtime runtime(isolated({kPluginDir, kFixtureDir / "backplane-sim.so"}));
  CHECK(runtime.devices("cpu")[0].memory_kinds == std::vector<std::string>{"host"});  // stated by the cpu plugin
  // The simulator states none: device memory with pinned host memory.
  CHECK(runtime.devices("sim")[0].memory_kinds == std::vector<std::string>{"device", "pinned_host"});
}
