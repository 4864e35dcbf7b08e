// Discovery: every plugin found gets exactly one status and an actionable
// reason, and broken plugins never hide the good ones.
#include "support/backend_named.hpp"
#include "support/temp_dir.hpp"

#include <backplane/backplane.hpp>

#include <doctest/doctest.h>

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <string>

using backplane::BackendInfo;
using backplane::BackendStatus;
using backplane::Runtime;
using backplane::testing::backend_named;
using backplane::testing::TempDir;

namespace {

const std::filesystem::path kPluginDir = BP_TEST_PLUGIN_DIR;    // the real plugins
const std::filesystem::path kFixtureDir = BP_TEST_FIXTURE_DIR;  // broken and test-only plugins
const std::filesystem::path kShadowDir = BP_TEST_SHADOW_DIR;    // a second backplane-cpu.so

Runtime::Options isolated(std::vector<std::filesystem::path> paths) {
  Runtime::Options options;
  options.plugin_paths = std::move(paths);
  options.ignore_environment = true;
  options.skip_default_paths = true;
  return options;
}

bool contains(const std::string& text, std::string_view part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("[discovery] the cpu plugin is available with a device") {
  Runtime runtime(isolated({kPluginDir}));
  const BackendInfo& cpu = backend_named(runtime, "cpu");
  CHECK(cpu.status == BackendStatus::kAvailable);
  CHECK(cpu.abi_version == "1.4");
  CHECK(cpu.origin == backplane::SearchOrigin::kCode);
  CHECK(runtime.is_available("cpu"));
  auto devices = runtime.devices("cpu");
  REQUIRE(devices.size() == 1);
  CHECK(devices[0].selector() == "cpu:0");
  CHECK(devices[0].memory_total > 0);
  REQUIRE(devices[0].memory_free.has_value());
  CHECK(*devices[0].memory_free <= devices[0].memory_total);
}

TEST_CASE("[discovery] each fixture plugin gets its status and a reason naming the problem") {
  Runtime runtime(isolated({kPluginDir, kFixtureDir, kShadowDir}));
  struct Expected {
    std::string_view name;
    BackendStatus status;
    std::string_view reason_part;
  };
  const Expected expectations[] = {
      {"cpu", BackendStatus::kAvailable, ""},
      {"sim", BackendStatus::kAvailable, ""},
      {"too_new", BackendStatus::kIncompatible, "plugin speaks ABI 2.0, this core speaks 1.x"},
      {"no_entry", BackendStatus::kFailed, "no entry symbol 'backplane_plugin_entry'"},
      {"null_entry", BackendStatus::kFailed, "returned no table"},
      {"short_table", BackendStatus::kFailed, "struct_size 16"},
      {"unavailable", BackendStatus::kUnavailable, "fixture: no such hardware (simulated)"},
      {"probe_error", BackendStatus::kFailed, "fixture: probe exploded"},
      {"name_mismatch", BackendStatus::kFailed, "declares backend 'other'"},
      {"missing_calls", BackendStatus::kFailed, "memory_allocate"},
  };
  for (const auto& expected : expectations) {
    CAPTURE(expected.name);
    const BackendInfo& info = backend_named(runtime, expected.name);
    CHECK(info.status == expected.status);
    CHECK_MESSAGE(contains(info.reason, expected.reason_part), "reason: " << info.reason);
    if (expected.status != BackendStatus::kAvailable) CHECK_FALSE(info.reason.empty());
  }
  CHECK(backend_named(runtime, "too_new").abi_version == "2.0");
  CHECK(backend_named(runtime, "probe_error").reason.find("device error") != std::string::npos);

  // The second backplane-cpu.so is listed, shadowed by the first, and never opened.
  auto shadowed = std::count_if(runtime.backends().begin(), runtime.backends().end(), [](const BackendInfo& info) {
    return info.name == "cpu" && info.status == BackendStatus::kShadowed && contains(info.reason, "shadowed by") &&
           info.plugin_path.parent_path() == kShadowDir;
  });
  CHECK(shadowed == 1);

  // The good backends still work next to the broken ones.
  CHECK(runtime.devices("cpu").size() == 1);
  CHECK(runtime.devices("sim").size() == 1);
}

TEST_CASE("[discovery] each plugin file gets exactly one entry") {
  Runtime runtime(isolated({kPluginDir, kFixtureDir, kShadowDir}));
  std::set<std::filesystem::path> files;
  for (const auto& info : runtime.backends()) {
    CAPTURE(info.plugin_path);
    CHECK(files.insert(info.plugin_path).second);
  }
  size_t on_disk = 0;
  for (const auto& dir : {kPluginDir, kFixtureDir, kShadowDir}) {
    for (const auto& item : std::filesystem::directory_iterator(dir)) {
      auto name = item.path().filename().string();
      if (name.starts_with("backplane-") && name.ends_with(".so")) ++on_disk;
    }
  }
  CHECK(files.size() == on_disk);
}

TEST_CASE("[discovery] listing all devices first thing discovers the backends") {
  auto options = isolated({kPluginDir});
  options.backend_options["cpu"] = {{"devices", "2"}};
  Runtime runtime(options);
  auto devices = runtime.devices();  // the first call on this runtime
  REQUIRE(devices.size() >= 2);
  CHECK(devices[0].selector() == "cpu:0");
  CHECK(devices[1].selector() == "cpu:1");
}

TEST_CASE("[discovery] asking about a backend that does not exist is a value, not an error") {
  Runtime runtime(isolated({kPluginDir}));
  CHECK(runtime.find_backend("cuda_nonexistent") == nullptr);
  CHECK_FALSE(runtime.is_available("cuda_nonexistent"));
  CHECK_FALSE(runtime.is_available(""));
}

TEST_CASE("[discovery] listing devices of a backend that is not available names its status") {
  Runtime runtime(isolated({kPluginDir, kFixtureDir}));
  try {
    runtime.devices("unavailable");
    FAIL("expected an error");
  } catch (const backplane::Error& error) {
    CHECK(error.code() == backplane::ErrorCode::kUnavailable);
    CHECK(contains(error.what(), "backend 'unavailable' is unavailable: fixture: no such hardware"));
  }
  try {
    runtime.devices("nope");
    FAIL("expected an error");
  } catch (const backplane::Error& error) {
    CHECK(error.code() == backplane::ErrorCode::kNotFound);
    CHECK(contains(error.what(), "no backend 'nope'"));
    CHECK(contains(error.what(), "cpu"));
  }
}

TEST_CASE("[discovery] a world-writable plugin file is refused") {
  TempDir dir;
  std::filesystem::permissions(dir.path(), std::filesystem::perms::owner_all | std::filesystem::perms::group_read |
                                               std::filesystem::perms::group_exec);
  auto copy = dir / "backplane-cpu.so";
  std::filesystem::copy_file(kPluginDir / "backplane-cpu.so", copy);
  ::chmod(copy.c_str(), 0666);
  Runtime runtime(isolated({dir.path()}));
  const BackendInfo& cpu = backend_named(runtime, "cpu");
  CHECK(cpu.status == BackendStatus::kFailed);
  CHECK(contains(cpu.reason, "world-writable"));
  CHECK(contains(cpu.reason, copy.string()));
}

TEST_CASE("[discovery] a plugin in a world-writable directory is refused") {
  TempDir dir;
  auto copy = dir / "backplane-cpu.so";
  std::filesystem::copy_file(kPluginDir / "backplane-cpu.so", copy);
  ::chmod(copy.c_str(), 0755);
  ::chmod(dir.path().c_str(), 0777);
  Runtime runtime(isolated({dir.path()}));
  const BackendInfo& cpu = backend_named(runtime, "cpu");
  CHECK(cpu.status == BackendStatus::kFailed);
  CHECK(contains(cpu.reason, "directory"));
  CHECK(contains(cpu.reason, "world-writable"));
}

TEST_CASE("[discovery] only backplane-<name>.so files are opened in a directory") {
  TempDir dir;
  ::chmod(dir.path().c_str(), 0755);
  dir.write("libsomething.so", "not a plugin");
  dir.write("backplane-.so", "no name");
  dir.write("README", "hello");
  dir.write("backplane-garbage.so", "this is not an ELF file");
  Runtime runtime(isolated({dir.path()}));
  REQUIRE(runtime.backends().size() == 1);
  const BackendInfo& garbage = runtime.backends()[0];
  CHECK(garbage.name == "garbage");
  CHECK(garbage.status == BackendStatus::kFailed);
  CHECK(contains(garbage.reason, "cannot load"));
  CHECK(contains(garbage.reason, "backplane-garbage.so"));  // dlerror names the file
}

TEST_CASE("[discovery] a file named directly may have any name") {
  TempDir dir;
  ::chmod(dir.path().c_str(), 0755);
  auto copy = dir / "my-cpu-build.so";
  std::filesystem::copy_file(kPluginDir / "backplane-cpu.so", copy);
  Runtime runtime(isolated({copy, kPluginDir}));
  std::vector<BackendInfo> cpus;
  for (const auto& info : runtime.backends()) {
    if (info.name == "cpu") cpus.push_back(info);
  }
  REQUIRE(cpus.size() == 2);
  CHECK(cpus[0].plugin_path == copy);
  CHECK(cpus[0].status == BackendStatus::kAvailable);
  CHECK(cpus[1].status == BackendStatus::kShadowed);
  CHECK(contains(cpus[1].reason, copy.string()));
}

TEST_CASE("[discovery] BACKPLANE_PLUGIN_PATH is searched after code paths and ignored when told to") {
  Runtime::Options options;
  options.skip_default_paths = true;
  options.environment =
      std::map<std::string, std::string>{{"BACKPLANE_PLUGIN_PATH", kFixtureDir.string() + "::" + kPluginDir.string()}};
  Runtime runtime(options);
  auto path = runtime.search_path();
  REQUIRE(path.size() == 2);
  CHECK(path[0].path == kFixtureDir);
  CHECK(path[0].origin == backplane::SearchOrigin::kEnvironment);
  CHECK(backend_named(runtime, "sim").status == BackendStatus::kAvailable);
  CHECK(backend_named(runtime, "cpu").status == BackendStatus::kAvailable);

  options.ignore_environment = true;
  Runtime ignoring(options);
  CHECK(ignoring.search_path().empty());
  CHECK(ignoring.backends().empty());
}

TEST_CASE("[discovery] the same directory given twice is searched once") {
  Runtime once(isolated({kPluginDir}));
  Runtime thrice(isolated({kPluginDir, kPluginDir / ".", kPluginDir}));
  CHECK(thrice.search_path().size() == 1);
  CHECK(thrice.backends().size() == once.backends().size());
  for (const auto& info : thrice.backends()) CHECK(info.status != BackendStatus::kShadowed);
}

TEST_CASE("[discovery] plugin options reach the backend") {
  auto options = isolated({kPluginDir});
  options.backend_options["cpu"] = {{"devices", "4"}};
  Runtime runtime(options);
  auto devices = runtime.devices("cpu");
  REQUIRE(devices.size() == 4);
  CHECK(devices[3].selector() == "cpu:3");

  options.backend_options["cpu"] = {{"devices", "many"}};
  Runtime bad(options);
  const BackendInfo& cpu = backend_named(bad, "cpu");
  CHECK(cpu.status == BackendStatus::kFailed);
  CHECK(contains(cpu.reason, "devices"));
  CHECK(contains(cpu.reason, "many"));
}

TEST_CASE("[discovery] the default runtime finds the build tree's plugins next to the core library") {
  // The test binary links the core statically, so "next to the core" is next
  // to this executable; the search path must still end with that entry.
  Runtime runtime(Runtime::Options{});
  auto path = runtime.search_path();
  REQUIRE_FALSE(path.empty());
  CHECK(path.back().origin == backplane::SearchOrigin::kCoreDir);
}
