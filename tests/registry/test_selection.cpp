// Default device precedence, scoped overrides across threads, selectors
// resolved against real backends, and the backend set/order.
#include "selection_fixture.hpp"
#include "support/temp_dir.hpp"

#include <backplane/backplane.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <barrier>
#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>

using backplane::BackendStatus;
using backplane::DefaultDeviceScope;
using backplane::Device;
using backplane::DeviceSource;
using backplane::ErrorCode;
using backplane::Runtime;
using backplane::testing::TempDir;

using namespace backplane::testing;

TEST_CASE("[selection] each precedence level wins over all below it and loses to all above") {
  // Level i, when set, names cpu:(3-i); the automatic choice is sim:0.
  struct Level {
    DeviceSource source;
    std::string selector;
  };
  const Level levels[] = {{DeviceSource::kScopedOverride, "cpu:3"},
                          {DeviceSource::kProcessSetting, "cpu:2"},
                          {DeviceSource::kEnvironment, "cpu:1"},
                          {DeviceSource::kConfigFile, "cpu:0"}};
  TempDir dir;
  auto with_default = dir.write("with.toml", "default_device = \"cpu:0\"\n");
  auto without_default = dir.write("without.toml", "# nothing\n");

  for (unsigned mask = 0; mask < 16; ++mask) {
    CAPTURE(mask);
    std::map<std::string, std::string> environment;
    if (mask & 4) environment["BACKPLANE_DEFAULT_DEVICE"] = levels[2].selector;
    Runtime runtime(test_options(environment, (mask & 8) ? with_default : without_default));
    if (mask & 2) runtime.set_default_device(levels[1].selector);
    std::optional<DefaultDeviceScope> scope;
    if (mask & 1) scope.emplace(runtime, levels[0].selector);

    auto chosen = runtime.default_device();
    int winner = -1;
    for (int level = 0; level < 4; ++level) {
      if (mask & (1u << level)) {
        winner = level;
        break;
      }
    }
    if (winner < 0) {
      CHECK(chosen.device.selector() == "sim:0");
      CHECK(chosen.source == DeviceSource::kAutomatic);
    } else {
      CHECK(chosen.device.selector() == levels[winner].selector);
      CHECK(chosen.source == levels[winner].source);
    }
  }
}

TEST_CASE("[selection] the source names are what backplane info prints") {
  CHECK(to_string(DeviceSource::kAutomatic) == "highest-priority available backend");
  CHECK(to_string(DeviceSource::kEnvironment) == "BACKPLANE_DEFAULT_DEVICE");
  CHECK(to_string(DeviceSource::kScopedOverride) == "scoped override");
}

TEST_CASE("[selection] scopes nest and unwind, also when an exception passes through") {
  Runtime runtime(test_options());
  CHECK(runtime.default_device().device.selector() == "sim:0");
  {
    DefaultDeviceScope outer(runtime, "cpu:1");
    CHECK(runtime.default_device().device.selector() == "cpu:1");
    try {
      DefaultDeviceScope inner(runtime, "cpu:2");
      CHECK(runtime.default_device().device.selector() == "cpu:2");
      throw std::runtime_error("unwind");
    } catch (const std::runtime_error&) {
    }
    CHECK(runtime.default_device().device.selector() == "cpu:1");
    CHECK(runtime.default_device().source == DeviceSource::kScopedOverride);
  }
  CHECK(runtime.default_device().device.selector() == "sim:0");
  CHECK(runtime.default_device().source == DeviceSource::kAutomatic);
}

TEST_CASE("[selection] two threads with different scopes each see their own") {
  Runtime runtime(test_options());
  std::barrier together(2);
  std::atomic<int> mismatches{0};
  auto worker = [&](const char* selector) {
    DefaultDeviceScope scope(runtime, selector);
    together.arrive_and_wait();  // both scopes are active now
    for (int i = 0; i < 1000; ++i) {
      if (runtime.default_device().device.selector() != selector) ++mismatches;
    }
    together.arrive_and_wait();
  };
  std::thread first(worker, "cpu:1");
  std::thread second(worker, "cpu:3");
  first.join();
  second.join();
  CHECK(mismatches == 0);
  CHECK(runtime.default_device().device.selector() == "sim:0");  // this thread has no scope
}

TEST_CASE("[selection] a worker thread can capture the current choice and re-enter it") {
  Runtime runtime(test_options());
  DefaultDeviceScope scope(runtime, "cpu:2");
  auto captured = runtime.current_scoped_device();
  REQUIRE(captured.has_value());
  std::string without_capture, with_capture;
  std::thread worker([&] {
    without_capture = runtime.default_device().device.selector();
    DefaultDeviceScope reentered(runtime, captured);
    with_capture = runtime.default_device().device.selector();
  });
  worker.join();
  CHECK(without_capture == "sim:0");
  CHECK(with_capture == "cpu:2");
}

TEST_CASE("[selection] scopes of one runtime do not leak into another") {
  Runtime first(test_options());
  Runtime second(test_options());
  DefaultDeviceScope scope(first, "cpu:3");
  CHECK(first.default_device().device.selector() == "cpu:3");
  CHECK(second.default_device().device.selector() == "sim:0");
}

TEST_CASE("[selection] selectors resolve against real backends with errors that name what exists") {
  Runtime runtime(test_options());
  CHECK(runtime.resolve("cpu") == Device{"cpu", 0});
  CHECK(runtime.resolve("cpu:3") == Device{"cpu", 3});
  CHECK(runtime.resolve("sim") == Device{"sim", 0});

  auto unknown = error_from([&] { runtime.resolve("cdua"); });
  CHECK(unknown.code() == ErrorCode::kNotFound);
  CHECK(contains(unknown.what(), "no backend 'cdua'"));
  CHECK(contains(unknown.what(), "cpu (available)"));
  CHECK(contains(unknown.what(), "unavailable (unavailable: fixture: no such hardware (simulated))"));

  auto unavailable = error_from([&] { runtime.resolve("unavailable:0"); });
  CHECK(unavailable.code() == ErrorCode::kUnavailable);
  CHECK(contains(unavailable.what(), "fixture: no such hardware"));

  auto failed = error_from([&] { runtime.resolve("probe_error"); });
  CHECK(failed.code() == ErrorCode::kUnavailable);
  CHECK(contains(failed.what(), "is failed: probe failed"));

  auto out_of_range = error_from([&] { runtime.resolve("cpu:4"); });
  CHECK(out_of_range.code() == ErrorCode::kOutOfRange);
  CHECK(contains(out_of_range.what(), "backend 'cpu' has 4 devices (cpu:0..cpu:3)"));

  auto syntax = error_from([&] { runtime.resolve("cpu:-1"); });
  CHECK(syntax.code() == ErrorCode::kInvalidArgument);
  CHECK(contains(syntax.what(), "cpu:-1"));
}

TEST_CASE("[selection] a device named by the user that cannot be used is an error, never a fallback") {
  Runtime from_environment(test_options({{"BACKPLANE_DEFAULT_DEVICE", "unavailable"}}));
  auto error = error_from([&] { from_environment.default_device(); });
  CHECK(error.code() == ErrorCode::kUnavailable);
  CHECK(contains(error.what(), "BACKPLANE_DEFAULT_DEVICE=unavailable"));
  CHECK(contains(error.what(), "fixture: no such hardware"));

  Runtime out_of_range(test_options({{"BACKPLANE_DEFAULT_DEVICE", "sim:7"}}));
  CHECK(error_from([&] { out_of_range.default_device(); }).code() == ErrorCode::kOutOfRange);

  Runtime in_code(test_options());
  auto bad_setting = error_from([&] { in_code.set_default_device("cuda_missing:0"); });
  CHECK(contains(bad_setting.what(), "no backend 'cuda_missing'"));
  CHECK(in_code.default_device().source == DeviceSource::kAutomatic);  // nothing was changed
  in_code.set_default_device("cpu:1");
  CHECK(in_code.default_device().device.selector() == "cpu:1");
  in_code.set_default_device(std::nullopt);
  CHECK(in_code.default_device().source == DeviceSource::kAutomatic);
}

TEST_CASE("[selection] BACKPLANE_BACKENDS restricts the set and fixes the order") {
  Runtime runtime(test_options({{"BACKPLANE_BACKENDS", "cpu,sim"}}));
  CHECK(runtime.default_device().device.selector() == "cpu:0");  // cpu first, although sim ranks higher
  const auto* unavailable = runtime.find_backend("unavailable");
  REQUIRE(unavailable != nullptr);
  CHECK(unavailable->status == BackendStatus::kDisabled);
  CHECK(contains(unavailable->reason, "not listed in BACKPLANE_BACKENDS=cpu,sim"));
  auto devices = runtime.devices();
  REQUIRE(devices.size() == 5);
  CHECK(devices.front().backend == "cpu");
  CHECK(devices.back().backend == "sim");
}

TEST_CASE("[selection] a backend listed first in BACKPLANE_BACKENDS must be usable") {
  Runtime unusable(test_options({{"BACKPLANE_BACKENDS", "unavailable,cpu"}}));
  auto error = error_from([&] { unusable.default_device(); });
  CHECK(contains(error.what(), "BACKPLANE_BACKENDS=unavailable,cpu puts 'unavailable' first"));
  CHECK(contains(error.what(), "fixture: no such hardware"));

  Runtime typo(test_options({{"BACKPLANE_BACKENDS", "cdua,cpu"}}));
  auto missing = error_from([&] { typo.default_device(); });
  CHECK(missing.code() == ErrorCode::kNotFound);
  CHECK(contains(missing.what(), "names backend 'cdua', which was not found"));

  Runtime malformed(test_options({{"BACKPLANE_BACKENDS", "cpu,,sim"}}));
  auto bad = error_from([&] { malformed.backends(); });
  CHECK(bad.code() == ErrorCode::kInvalidArgument);
  CHECK(contains(bad.what(), "BACKPLANE_BACKENDS='cpu,,sim'"));
}

TEST_CASE("[selection] config priority, enabled and backends change the automatic choice") {
  TempDir dir;
  auto prioritised = dir.write("priority.toml", "[backend.cpu]\npriority = 100\n");
  Runtime by_priority(test_options({}, prioritised));
  CHECK(by_priority.default_device().device.selector() == "cpu:0");
  CHECK(by_priority.find_backend("cpu")->priority == 100);

  auto disabling = dir.write("disable.toml", "[backend.sim]\nenabled = false\n");
  Runtime without_sim(test_options({}, disabling));
  CHECK(without_sim.find_backend("sim")->status == BackendStatus::kDisabled);
  CHECK(contains(without_sim.find_backend("sim")->reason, "enabled = false"));
  CHECK(contains(without_sim.find_backend("sim")->reason, disabling.string()));
  CHECK(without_sim.default_device().device.selector() == "cpu:0");

  auto listing = dir.write("backends.toml", "backends = [\"cpu\"]\n");
  Runtime only_cpu(test_options({}, listing));
  CHECK(only_cpu.find_backend("sim")->status == BackendStatus::kDisabled);
  CHECK(contains(only_cpu.find_backend("sim")->reason, "'backends' in"));

  // The environment wins over the config's list.
  Runtime environment_wins(test_options({{"BACKPLANE_BACKENDS", "sim"}}, listing));
  CHECK(environment_wins.default_device().device.selector() == "sim:0");
}

TEST_CASE("[selection] the priority a probe reports ranks its backend; the config's priority still wins") {
  // sim's table says 50 (above cpu's 10); its probe_priority option makes the
  // probe report another (plugin ABI 1.2).
  auto ranked = [](std::string probe_priority, std::optional<std::filesystem::path> config = std::nullopt) {
    Runtime::Options options = test_options({}, std::move(config));
    options.backend_options["sim"] = {{"probe_priority", std::move(probe_priority)}};
    return options;
  };
  Runtime below_cpu(ranked("5"));  // what it found ranks below the native cpu backend
  CHECK(below_cpu.find_backend("sim")->priority == 5);
  CHECK(below_cpu.default_device().device.selector() == "cpu:0");

  TempDir dir;
  auto cpu_at_100 = dir.write("cpu.toml", "[backend.cpu]\npriority = 100\n");
  Runtime table_priority(test_options({}, cpu_at_100));
  CHECK(table_priority.find_backend("sim")->priority == 50);
  CHECK(table_priority.default_device().device.selector() == "cpu:0");
  Runtime above_cpu(ranked("200", cpu_at_100));  // reported above cpu's configured 100: wins
  CHECK(above_cpu.find_backend("sim")->priority == 200);
  CHECK(above_cpu.find_backend("cpu")->priority == 100);
  CHECK(above_cpu.default_device().device.selector() == "sim:0");
  CHECK(above_cpu.devices().front().backend == "sim");

  auto sim_at_1 = dir.write("sim.toml", "[backend.sim]\npriority = 1\n");
  Runtime configured(ranked("200", sim_at_1));  // the config overrides what the probe said
  CHECK(configured.find_backend("sim")->priority == 1);
  CHECK(configured.default_device().device.selector() == "cpu:0");
}

TEST_CASE("[selection] config plugin options reach the plugin; code options win per key") {
  TempDir dir;
  auto config = dir.write("options.toml", "[backend.sim]\ndevices = 3\n[backend.cpu]\ndevices = 2\n");
  Runtime runtime(test_options({}, config));  // code says cpu devices = 4
  CHECK(runtime.devices("sim").size() == 3);
  CHECK(runtime.devices("cpu").size() == 4);
}

TEST_CASE("[selection] a malformed config file is an error naming file and line") {
  TempDir dir;
  auto broken = dir.write("broken.toml", "backends = [\"cpu\"\ndefault_device = 3\n");
  Runtime runtime(test_options({}, broken));
  auto error = error_from([&] { runtime.backends(); });
  CHECK(error.code() == backplane::ErrorCode::kConfig);
  CHECK(contains(error.what(), broken.string()));

  Runtime missing(test_options({}, dir / "absent.toml"));
  auto absent = error_from([&] { missing.backends(); });
  CHECK(absent.code() == ErrorCode::kNotFound);
  CHECK(contains(absent.what(), "absent.toml"));
}

TEST_CASE("[selection] the automatic choice records what it passed over") {
  Runtime runtime(test_options());
  auto chosen = runtime.default_device();
  for (const backplane::BackendInfo& info : runtime.backends()) {
    if (info.status == BackendStatus::kUnavailable && info.priority > runtime.find_backend("cpu")->priority) {
      CHECK(contains(chosen.fallback_note, info.name + " (unavailable: "));
    }
  }
}

TEST_CASE("[selection] a backend the user configured that fails stops the automatic choice, naming the cause") {
  Runtime::Options options = test_options();
  options.backend_options["sim"] = {{"devices", "0"}};  // the simulated plugin refuses zero devices
  Runtime runtime(options);
  REQUIRE(runtime.find_backend("sim")->status == BackendStatus::kFailed);
  const backplane::Error error = error_from([&] { (void)runtime.default_device(); });
  CHECK(error.code() == backplane::ErrorCode::kConfig);
  CHECK(contains(error.what(),
                 "cannot choose the default device: backend 'sim', configured by "
                 "Runtime::Options::backend_options, failed: "));
  CHECK(contains(error.what(), "option devices = \"0\" is invalid"));
  // Any device can still be named explicitly.
  CHECK(runtime.resolve("cpu:1") == Device{"cpu", 1});
  DefaultDeviceScope on_cpu(runtime, "cpu:1");
  CHECK(runtime.default_device().device == Device{"cpu", 1});
}

TEST_CASE("[selection] a scope still open on a destroyed runtime does not leak into a later runtime") {
  // Scopes are keyed by a unique runtime id: a new runtime may well be
  // allocated where the old one was.
  std::optional<DefaultDeviceScope> scope;
  {
    auto first = std::make_unique<Runtime>(test_options());
    scope.emplace(*first, "cpu:3");
  }
  for (int attempt = 0; attempt < 4; ++attempt) {
    Runtime later(test_options());
    CHECK(later.default_device().source == DeviceSource::kAutomatic);
    CHECK_FALSE(later.current_scoped_device().has_value());
  }
  scope.reset();
}
