// One plugin file, several backends: each PJRT library is the backend
// pjrt_<name> of the pjrt adapter, here the stand-in of tests/plugins/pjrt,
// whose probe reads its "library" as text and says what options it got.
#include "support/backend_named.hpp"
#include "support/temp_dir.hpp"

#include <backplane/backplane.hpp>

#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

using backplane::BackendInfo;
using backplane::BackendStatus;
using backplane::PluginSource;
using backplane::Runtime;
using backplane::SearchOrigin;
using backplane::testing::backend_named;
using backplane::testing::TempDir;

namespace {

const std::filesystem::path kFakePjrtDir = BP_TEST_FAKE_PJRT_DIR;  // backplane-pjrt.so, the stand-in adapter
const std::filesystem::path kFixtureDir = BP_TEST_FIXTURE_DIR;     // no adapter there

bool contains(const std::string& text, std::string_view part) { return text.find(part) != std::string::npos; }

PluginSource pjrt_source(std::string name, std::filesystem::path library,
                         std::vector<std::pair<std::string, std::string>> create_options = {}) {
  PluginSource source;
  source.kind = PluginSource::Kind::kPjrtLibrary;
  source.name = std::move(name);
  source.path = std::move(library);
  source.create_options = std::move(create_options);
  return source;
}

Runtime::Options options_with(std::vector<PluginSource> sources, std::map<std::string, std::string> environment = {}) {
  Runtime::Options options;
  options.plugin_paths = {kFakePjrtDir};
  options.environment = std::move(environment);
  options.skip_default_paths = true;
  options.sources = std::move(sources);
  return options;
}

std::vector<std::string> names_of(const Runtime& runtime) {
  std::vector<std::string> names;
  for (const auto& backend : runtime.backends()) names.push_back(backend.name);
  return names;
}

}  // namespace

TEST_CASE("[pjrt instances] each PJRT library is a backend pjrt_<name>; the adapter is listed only through them") {
  TempDir dir;
  const auto cpu = dir.write("cpu.so", "reason=fake cpu\ndevices=2\nmemories=device,pinned_host,unpinned_host\n");
  const auto other = dir.write("other.so", "available=0\nreason=No visible GPU devices.\n");
  Runtime runtime(
      options_with({pjrt_source("cpu", cpu, {{"cpu_device_count", "int64:2"}}), pjrt_source("Other-Lib", other)}));
  CHECK(names_of(runtime) == std::vector<std::string>{"pjrt_cpu", "pjrt_other_lib"});

  const BackendInfo& first = backend_named(runtime, "pjrt_cpu");
  CHECK(first.status == BackendStatus::kAvailable);
  CHECK(first.reason == "fake cpu (library " + cpu.string() + "; create options: cpu_device_count=int64:2)");
  CHECK(first.plugin_path == kFakePjrtDir / "backplane-pjrt.so");
  CHECK(first.library == cpu);
  CHECK(first.origin == SearchOrigin::kCode);
  CHECK(first.origin_detail == "Runtime::Options::sources");
  CHECK(first.plugin_version == "fake-adapter");
  const auto devices = runtime.devices("pjrt_cpu");
  REQUIRE(devices.size() == 2);
  CHECK(devices[1].selector() == "pjrt_cpu:1");
  CHECK(devices[1].name == "fake PJRT device 1");
  CHECK(devices[1].memory_kinds == std::vector<std::string>{"device", "pinned_host", "unpinned_host"});

  const BackendInfo& second = backend_named(runtime, "pjrt_other_lib");
  CHECK(second.status == BackendStatus::kUnavailable);
  CHECK(second.reason == "No visible GPU devices. (library " + other.string() + "; create options: )");
  CHECK(runtime.find_backend("pjrt") == nullptr);
}

TEST_CASE("[pjrt instances] options: library, then create.*, then the config's and code's for that backend name") {
  TempDir dir;
  const auto library = dir.write("lib.so", "reason=ordered\n");
  const auto config = dir.write("config.toml", "[backend.pjrt_cpu]\n\"create.from_config\" = \"string:c\"\n");
  auto options = options_with({pjrt_source("cpu", library, {{"first", "bool:true"}})});
  options.config_file = config;
  options.backend_options["pjrt_cpu"] = {{"create.from_code", "int64_list:1,2"}};
  Runtime runtime(options);
  const BackendInfo& cpu = backend_named(runtime, "pjrt_cpu");
  REQUIRE(cpu.status == BackendStatus::kAvailable);
  CHECK(contains(cpu.reason, "create options: first=bool:true, from_config=string:c, from_code=int64_list:1,2)"));
}

TEST_CASE("[pjrt instances] two sources of one name: the later is shadowed, naming the earlier") {
  TempDir dir;
  const auto first = dir.write("first.so", "reason=first\n");
  const auto second = dir.write("second.so", "reason=second\n");
  Runtime runtime(
      options_with({pjrt_source("cpu", first)}, {{"PJRT_NAMES_AND_LIBRARY_PATHS", "CPU:" + second.string()}}));
  const auto& backends = runtime.backends();
  REQUIRE(backends.size() == 2);
  CHECK(backends[0].status == BackendStatus::kAvailable);
  CHECK(backends[1].name == "pjrt_cpu");
  CHECK(backends[1].status == BackendStatus::kShadowed);
  CHECK(backends[1].reason == "shadowed by " + first.string() + " (Runtime::Options::sources), found earlier");
  CHECK(backends[1].library == second);
  CHECK(backends[1].origin == SearchOrigin::kEnvironment);
  CHECK(backends[1].origin_detail == "PJRT_NAMES_AND_LIBRARY_PATHS");
}

TEST_CASE("[pjrt instances] a library others could replace is refused before anything loads it") {
  TempDir dir;
  const auto library = dir.write("shared.so", "reason=must not be read\n");
  REQUIRE(::chmod(library.c_str(), 0666) == 0);
  Runtime runtime(options_with({pjrt_source("shared", library)}));
  const BackendInfo& shared = backend_named(runtime, "pjrt_shared");
  CHECK(shared.status == BackendStatus::kFailed);
  CHECK(shared.reason == "refused: " + library.string() +
                             " is world-writable (anyone could replace it); run chmod o-w " + library.string());
}

TEST_CASE("[pjrt instances] a library reached through another user's link in a sticky directory is refused") {
  if (::geteuid() != 0) {
    MESSAGE("skipped: needs root to give a link to another user");
    return;
  }
  TempDir dir;
  const auto library = dir.write("lib/real.so", "reason=the file judged\n");
  const auto shared = dir / "tmp";
  std::filesystem::create_directory(shared);
  REQUIRE(::chmod(shared.c_str(), 01777) == 0);
  const auto link = shared / "pjrt.so";
  std::filesystem::create_symlink(library, link);
  {
    // Root's own link is followed; the adapter is handed the file judged and
    // names it by where the link led.
    Runtime runtime(options_with({pjrt_source("linked", link)}));
    const BackendInfo& linked = backend_named(runtime, "pjrt_linked");
    CHECK(linked.status == BackendStatus::kAvailable);
    CHECK(linked.reason == "the file judged (library " + library.string() + "; create options: )");
  }
  REQUIRE(::lchown(link.c_str(), 12345, static_cast<gid_t>(-1)) == 0);
  Runtime runtime(options_with({pjrt_source("linked", link)}));
  const BackendInfo& linked = backend_named(runtime, "pjrt_linked");
  CHECK(linked.status == BackendStatus::kFailed);
  CHECK(linked.reason == "refused: " + link.string() + " is a symlink in the sticky world-writable directory " +
                             shared.string() +
                             " and belongs to uid 12345, neither the user running this (root) nor the directory's "
                             "owner, who could re-point it at another file at any time (the kernel's "
                             "protected_symlinks rule, which backplane follows whether or not the kernel does); "
                             "name the file it leads to (" +
                             library.string() + ") instead");
}

TEST_CASE("[pjrt instances] a library set in [backend.pjrt_NAME] or in code is the one checked, used and listed") {
  TempDir dir;
  const auto listed = dir.write("listed.so", "reason=the [pjrt.NAME] library\n");
  const auto chosen = dir.write("chosen.so", "reason=the [backend.pjrt_NAME] library\n");
  auto options = options_with({});
  options.config_file =
      dir.write("config.toml",
                "[pjrt.cpu]\nlibrary = \"listed.so\"\n[backend.pjrt_cpu]\nlibrary = \"" + chosen.string() + "\"\n");
  {
    Runtime runtime(options);
    const BackendInfo& cpu = backend_named(runtime, "pjrt_cpu");
    CHECK(cpu.status == BackendStatus::kAvailable);
    CHECK(cpu.library == chosen);  // what `info` prints as library:
    CHECK(cpu.reason == "the [backend.pjrt_NAME] library (library " + chosen.string() + "; create options: )");
  }
  const auto from_code = dir.write("code.so", "reason=the code's library\n");
  options.backend_options["pjrt_cpu"] = {{"library", from_code.string()}};
  {
    Runtime runtime(options);
    const BackendInfo& cpu = backend_named(runtime, "pjrt_cpu");
    CHECK(cpu.library == from_code);
    CHECK(cpu.reason == "the code's library (library " + from_code.string() + "; create options: )");
  }
  if (::geteuid() != 0) return;  // only root can give a file away
  // Another user's file: refused by the one trust rule, whichever table names it.
  const auto theirs = dir.write("theirs.so", "reason=must not be read\n");
  REQUIRE(::chown(theirs.c_str(), 12345, static_cast<gid_t>(-1)) == 0);
  const std::string refusal = "refused: " + theirs.string() +
                              " is owned by uid 12345, neither root nor the user running this (root), who could "
                              "change it; run chown root " +
                              theirs.string();
  options.backend_options.clear();
  options.config_file = dir.write("theirs_in_backend.toml",
                                  "[pjrt.cpu]\nlibrary = \"listed.so\"\n[backend.pjrt_cpu]\n"
                                  "library = \"" +
                                      theirs.string() + "\"\n");
  Runtime in_backend(options);
  CHECK(backend_named(in_backend, "pjrt_cpu").status == BackendStatus::kFailed);
  CHECK(backend_named(in_backend, "pjrt_cpu").library == theirs);
  CHECK(backend_named(in_backend, "pjrt_cpu").reason == refusal);
  options.config_file = dir.write("theirs_in_pjrt.toml", "[pjrt.cpu]\nlibrary = \"theirs.so\"\n");
  Runtime in_pjrt(options);
  CHECK(backend_named(in_pjrt, "pjrt_cpu").status == BackendStatus::kFailed);
  CHECK(backend_named(in_pjrt, "pjrt_cpu").reason == refusal);
  auto code = options_with({pjrt_source("cpu", listed)});
  code.backend_options["pjrt_cpu"] = {{"library", theirs.string()}};
  Runtime in_code(code);
  CHECK(backend_named(in_code, "pjrt_cpu").status == BackendStatus::kFailed);
  CHECK(backend_named(in_code, "pjrt_cpu").reason == refusal);
}

TEST_CASE("[pjrt instances] a missing library, or one that is not a file, is failed naming the path and why") {
  TempDir dir;
  std::filesystem::create_directory(dir / "a_directory.so");
  Runtime runtime(options_with({pjrt_source("gone", dir / "gone.so"), pjrt_source("dir", dir / "a_directory.so")}));
  const BackendInfo& gone = backend_named(runtime, "pjrt_gone");
  CHECK(gone.status == BackendStatus::kFailed);
  CHECK(gone.reason == "cannot use the PJRT library " + (dir / "gone.so").string() + ": No such file or directory");
  const BackendInfo& directory = backend_named(runtime, "pjrt_dir");
  CHECK(directory.reason == "cannot use the PJRT library " + (dir / "a_directory.so").string() +
                                ": it is a directory, not a regular file (a PJRT plugin is a shared library)");
  if (::geteuid() != 0) {  // root reads anything
    const auto locked = dir.write("locked.so", "");
    REQUIRE(::chmod(locked.c_str(), 0) == 0);
    Runtime unreadable(options_with({pjrt_source("locked", locked)}));
    CHECK(backend_named(unreadable, "pjrt_locked").reason ==
          "cannot use the PJRT library " + locked.string() + ": Permission denied");
  }
}

TEST_CASE(
    "[pjrt instances] without the adapter, each source is failed saying it is not installed and where it looked") {
  TempDir dir;
  const auto library = dir.write("lib.so", "");
  auto options = options_with({pjrt_source("cpu", library)});
  options.plugin_paths = {kFixtureDir};
  Runtime runtime(options);
  const BackendInfo& cpu = backend_named(runtime, "pjrt_cpu");
  CHECK(cpu.status == BackendStatus::kFailed);
  CHECK(cpu.reason ==
        "the pjrt adapter plugin (backplane-pjrt.so), which drives PJRT plugins, is not installed: "
        "looked in " +
            kFixtureDir.string() +
            " (every build has it unless configured with -Dpjrt=disabled: rebuild without that option, see "
            "docs/pjrt.md, Building)");
  CHECK(cpu.library == library);
  // The fixture directory's plugins are as they were.
  CHECK(backend_named(runtime, "unavailable").status == BackendStatus::kUnavailable);
}

TEST_CASE("[pjrt instances] the adapter without any PJRT library is unavailable, saying where it looked") {
  Runtime::Options options = options_with({});
  options.ignore_environment = true;
  Runtime runtime(options);
  const BackendInfo& pjrt = backend_named(runtime, "pjrt");
  CHECK(pjrt.status == BackendStatus::kUnavailable);
  CHECK(pjrt.reason ==
        "no PJRT plugin found: looked in Runtime::Options::sources, [pjrt.NAME] tables (no config "
        "file), PJRT_NAMES_AND_LIBRARY_PATHS (environment ignored), Python packages (no site directories "
        "given)");
}

TEST_CASE("[pjrt instances] a second adapter is shadowed by the first; a broken source is failed with its problem") {
  TempDir dir;
  std::filesystem::create_directory(dir / "second");
  std::filesystem::copy_file(kFakePjrtDir / "backplane-pjrt.so", dir / "second" / "backplane-pjrt.so");
  auto broken = pjrt_source("broken", dir / "x.so");
  broken.problem = "the wheel's library could not be told";
  const auto good = dir.write("good.so", "");
  auto options = options_with({broken, pjrt_source("good", good, {{"n", "int64"}})});
  options.plugin_paths.push_back(dir / "second");
  Runtime runtime(options);
  CHECK(names_of(runtime) == std::vector<std::string>{"pjrt_broken", "pjrt_good", "pjrt"});
  CHECK(backend_named(runtime, "pjrt_broken").reason == "the wheel's library could not be told");
  CHECK(backend_named(runtime, "pjrt_good").reason ==
        "PJRT create option 'n' = 'int64' has no type; write <type>:<value> with type int64, bool, float, string or "
        "int64_list");
  const BackendInfo& second = runtime.backends().back();
  CHECK(second.status == BackendStatus::kShadowed);
  CHECK(second.reason == "shadowed by " + (kFakePjrtDir / "backplane-pjrt.so").string() + ", found earlier");
}

TEST_CASE("[pjrt instances] BACKPLANE_BACKENDS, backends and enabled = false act on instance names") {
  TempDir dir;
  const auto a = dir.write("a.so", "");
  const auto b = dir.write("b.so", "");
  Runtime listed(options_with({pjrt_source("a", a), pjrt_source("b", b)}, {{"BACKPLANE_BACKENDS", "pjrt_b"}}));
  CHECK(backend_named(listed, "pjrt_a").status == BackendStatus::kDisabled);
  CHECK(backend_named(listed, "pjrt_a").reason == "disabled: not listed in BACKPLANE_BACKENDS=pjrt_b");
  CHECK(backend_named(listed, "pjrt_b").status == BackendStatus::kAvailable);

  auto options = options_with({pjrt_source("a", a), pjrt_source("b", b)});
  options.config_file = dir.write("config.toml", "[backend.pjrt_a]\nenabled = false\n");
  Runtime configured(options);
  CHECK(backend_named(configured, "pjrt_a").status == BackendStatus::kDisabled);
  CHECK(contains(backend_named(configured, "pjrt_a").reason, "[backend.pjrt_a] enabled = false in"));
  CHECK(backend_named(configured, "pjrt_b").status == BackendStatus::kAvailable);
}

TEST_CASE("[pjrt instances] from the config's [pjrt.NAME] and PJRT_NAMES_AND_LIBRARY_PATHS, each with its origin") {
  TempDir dir;
  dir.write("libs/config.so", "reason=from config\n");
  const auto from_env = dir.write("env.so", "reason=from env\n");
  auto options = options_with({}, {{"PJRT_NAMES_AND_LIBRARY_PATHS", "env:" + from_env.string() + ",oops"}});
  options.config_file =
      dir.write("config.toml", "[pjrt.conf]\nlibrary = \"libs/config.so\"\noptions = { cpu_device_count = 3 }\n");
  Runtime runtime(options);
  CHECK(names_of(runtime) == std::vector<std::string>{"pjrt_conf", "pjrt_env"});
  const BackendInfo& conf = backend_named(runtime, "pjrt_conf");
  CHECK(conf.status == BackendStatus::kAvailable);
  CHECK(conf.origin == SearchOrigin::kConfig);
  CHECK(conf.origin_detail == "config " + (dir / "config.toml").string() + ":1:1 [pjrt.conf]");
  CHECK(conf.library == dir / "libs/config.so");
  CHECK(contains(conf.reason, "create options: cpu_device_count=int64:3)"));
  const BackendInfo& env = backend_named(runtime, "pjrt_env");
  CHECK(env.origin_detail == "PJRT_NAMES_AND_LIBRARY_PATHS");
  const auto warnings = runtime.config().warnings;
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0] ==
        "PJRT_NAMES_AND_LIBRARY_PATHS: entry 'oops' ignored: expected NAME:PATH (comma-separated "
        "entries)");
}

TEST_CASE("[pjrt instances] installed packages: PJRT wheels become instances, backplane.plugins join the search path") {
  TempDir site;
  site.write("xla_cpu_pjrt-0.0.1.dist-info/METADATA", "Name: xla_cpu_pjrt\nVersion: 0.0.1\n");
  site.write("xla_cpu_pjrt-0.0.1.dist-info/entry_points.txt",
             "[xla_plugins]\nxla_cpu_pjrt = xla_plugins.xla_cpu_pjrt\n");
  site.write("xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so", "reason=from a wheel\n");
  site.write("vendor-2.0.dist-info/METADATA", "Name: vendor\nVersion: 2.0\n");
  site.write("vendor-2.0.dist-info/entry_points.txt",
             "[backplane.plugins]\nvendor = vendor_plugins\nbroken = vendor_missing\n");
  std::filesystem::create_directory(site / "vendor_plugins");
  std::filesystem::copy_file(kFixtureDir / "backplane-unavailable.so",
                             site / "vendor_plugins/backplane-unavailable.so");
  auto options = options_with({});
  options.ignore_environment = true;
  options.python_paths = {site.path()};
  Runtime runtime(options);

  const BackendInfo& wheel = backend_named(runtime, "pjrt_xla_cpu_pjrt");
  CHECK(wheel.status == BackendStatus::kAvailable);
  CHECK(wheel.origin == SearchOrigin::kPackage);
  CHECK(wheel.origin_detail == "xla_cpu_pjrt 0.0.1 (entry point xla_plugins:xla_cpu_pjrt)");
  CHECK(wheel.library == site / "xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so");
  const BackendInfo& plugin = backend_named(runtime, "unavailable");
  CHECK(plugin.status == BackendStatus::kUnavailable);
  CHECK(plugin.origin == SearchOrigin::kPackage);
  CHECK(plugin.origin_detail == "vendor 2.0 (entry point backplane.plugins:vendor)");
  CHECK(plugin.plugin_path == site / "vendor_plugins/backplane-unavailable.so");
  const BackendInfo& broken = backend_named(runtime, "broken");
  CHECK(broken.status == BackendStatus::kFailed);
  CHECK(contains(broken.reason,
                 "vendor 2.0 (entry point backplane.plugins:broken): package vendor_missing is not "
                 "installed in "));
  const auto search_path = runtime.search_path();
  REQUIRE(search_path.size() == 2);
  CHECK(search_path[1].path == site / "vendor_plugins");
  CHECK(search_path[1].origin == SearchOrigin::kPackage);
  CHECK(search_path[1].origin_detail == "vendor 2.0 (entry point backplane.plugins:vendor)");
}

TEST_CASE("[pjrt instances] with probe isolation, each instance is probed in the helper with its own options") {
  TempDir dir;
  const auto a = dir.write("a.so", "reason=a\ndevices=1\n");
  const auto b = dir.write("b.so", "reason=b\ndevices=3\n");
  auto options = options_with({pjrt_source("a", a), pjrt_source("b", b)});
  options.probe_isolation = backplane::ProbeIsolation::kProcess;
  Runtime runtime(options);
  CHECK(backend_named(runtime, "pjrt_a").status == BackendStatus::kAvailable);
  CHECK(runtime.devices("pjrt_a").size() == 1);
  CHECK(runtime.devices("pjrt_b").size() == 3);
}
