// The automatic default device in data-parallel jobs: the launcher's local
// rank picks the device, explicit choices still win.
#include "selection_fixture.hpp"
#include "support/temp_dir.hpp"

#include <backplane/backplane.hpp>

#include <doctest/doctest.h>

#include <stdlib.h>

using namespace backplane;
using namespace backplane::testing;

namespace {

// The cpu backend alone, with two devices set the way a user sets them.
struct TwoCpus {
  TempDir dir;
  std::filesystem::path config = dir.write("two_cpus.toml",
                                           "[backend.cpu]\ndevices = 2\n[backend.sim]\nenabled = false\n"
                                           "[backend.cuda]\nenabled = false\n");

  Runtime::Options options(std::map<std::string, std::string> environment) const {
    Runtime::Options options = test_options(std::move(environment), config);
    options.backend_options.clear();  // the config's device count, not the fixture's
    return options;
  }
};

}  // namespace

TEST_CASE("[local rank] LOCAL_RANK picks the device of the highest-priority backend and is named as the source") {
  TwoCpus cpus;
  Runtime runtime(cpus.options({{"LOCAL_RANK", "1"}}));
  DefaultDevice chosen = runtime.default_device();
  CHECK(chosen.device.selector() == "cpu:1");
  CHECK(chosen.source == DeviceSource::kLocalRank);
  CHECK(chosen.description == "LOCAL_RANK=1");
  CHECK(to_string(DeviceSource::kLocalRank) == "local rank");
}

TEST_CASE("[local rank] ranks beyond the device count wrap around") {
  TwoCpus cpus;
  CHECK(Runtime(cpus.options({{"LOCAL_RANK", "3"}})).default_device().device.selector() == "cpu:1");
  CHECK(Runtime(cpus.options({{"LOCAL_RANK", "4"}})).default_device().device.selector() == "cpu:0");
  CHECK(Runtime(cpus.options({{"LOCAL_RANK", "0"}})).default_device().device.selector() == "cpu:0");
}

TEST_CASE("[local rank] LOCAL_RANK, then OMPI_COMM_WORLD_LOCAL_RANK, then SLURM_LOCALID") {
  TwoCpus cpus;
  auto described = [&](std::map<std::string, std::string> environment) {
    DefaultDevice chosen = Runtime(cpus.options(std::move(environment))).default_device();
    return chosen.device.selector() + " " + chosen.description;
  };
  CHECK(described({{"LOCAL_RANK", "1"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "0"}, {"SLURM_LOCALID", "0"}}) ==
        "cpu:1 LOCAL_RANK=1");
  CHECK(described({{"OMPI_COMM_WORLD_LOCAL_RANK", "1"}, {"SLURM_LOCALID", "0"}}) ==
        "cpu:1 OMPI_COMM_WORLD_LOCAL_RANK=1");
  CHECK(described({{"SLURM_LOCALID", "5"}}) == "cpu:1 SLURM_LOCALID=5");
  // Set but empty counts as unset.
  CHECK(described({{"LOCAL_RANK", ""}, {"SLURM_LOCALID", "1"}}) == "cpu:1 SLURM_LOCALID=1");
  CHECK(described({}) == "cpu:0 highest-priority available backend");
}

TEST_CASE("[local rank] explicit choices win over the local rank") {
  TempDir dir;
  auto with_default = dir.write("default.toml", "default_device = \"cpu:2\"\n");
  Runtime from_config(test_options({{"LOCAL_RANK", "1"}}, with_default));
  CHECK(from_config.default_device().device.selector() == "cpu:2");
  CHECK(from_config.default_device().source == DeviceSource::kConfigFile);

  Runtime from_environment(test_options({{"LOCAL_RANK", "1"}, {"BACKPLANE_DEFAULT_DEVICE", "cpu:3"}}));
  CHECK(from_environment.default_device().device.selector() == "cpu:3");
  CHECK(from_environment.default_device().description == "BACKPLANE_DEFAULT_DEVICE");

  Runtime::Options two_sims = test_options({{"LOCAL_RANK", "1"}});
  two_sims.backend_options["sim"] = {{"devices", "2"}};
  Runtime in_code(two_sims);
  in_code.set_default_device("cpu:0");
  CHECK(in_code.default_device().device.selector() == "cpu:0");
  CHECK(in_code.default_device().source == DeviceSource::kProcessSetting);
  in_code.set_default_device(std::nullopt);
  {
    DefaultDeviceScope scope(in_code, "cpu:3");
    CHECK(in_code.default_device().device.selector() == "cpu:3");
    CHECK(in_code.default_device().source == DeviceSource::kScopedOverride);
  }
  // Nothing explicit left: the local rank, on the highest-priority backend.
  CHECK(in_code.default_device().device.selector() == "sim:1");
  CHECK(in_code.default_device().source == DeviceSource::kLocalRank);
}

TEST_CASE("[local rank] a backend order picks the backend; the local rank still picks its device") {
  Runtime runtime(test_options({{"LOCAL_RANK", "6"}, {"BACKPLANE_BACKENDS", "cpu,sim"}}));
  DefaultDevice chosen = runtime.default_device();
  CHECK(chosen.device.selector() == "cpu:2");  // 6 % 4 devices
  CHECK(chosen.description == "LOCAL_RANK=6");
}

TEST_CASE("[local rank] a value that is not a non-negative integer is an error naming variable and value") {
  for (const char* bad : {"-1", "one", "1.0", " 1", "99999999999999999999999"}) {
    CAPTURE(bad);
    Runtime runtime(test_options({{"OMPI_COMM_WORLD_LOCAL_RANK", bad}}));
    auto error = error_from([&] { runtime.default_device(); });
    CHECK(error.code() == ErrorCode::kInvalidArgument);
    CHECK(
        contains(error.what(), "OMPI_COMM_WORLD_LOCAL_RANK='" + std::string(bad) + "' is not a non-negative integer"));
  }
  // Only the automatic choice reads it: a device chosen explicitly still works.
  Runtime explicit_choice(test_options({{"LOCAL_RANK", "x"}, {"BACKPLANE_DEFAULT_DEVICE", "cpu:1"}}));
  CHECK(explicit_choice.default_device().device.selector() == "cpu:1");
}

TEST_CASE("[local rank] ignore_environment ignores the launchers' variables too") {
  TempDir dir;
  ::setenv("LOCAL_RANK", "3", 1);
  Runtime::Options options = test_options({}, dir.write("empty.toml", "# nothing\n"));
  options.environment.reset();
  options.ignore_environment = true;
  Runtime ignoring(options);
  CHECK(ignoring.default_device().device.selector() == "sim:0");
  CHECK(ignoring.default_device().source == DeviceSource::kAutomatic);

  options.ignore_environment = false;
  Runtime reading(options);
  CHECK(reading.default_device().description == "LOCAL_RANK=3");
  ::unsetenv("LOCAL_RANK");
}
