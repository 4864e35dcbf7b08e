// How the pjrt tests find the PJRT libraries a user has installed, and the
// one place they make a PJRT backend.
#pragma once

#include "support/run_command.hpp"

#include <backplane/backplane.h>
#include <backplane/plugin.h>
#include <backplane/backplane.hpp>

#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace backplane::testing {

using PjrtOptions = std::vector<std::pair<std::string, std::string>>;

// A PJRT plugin library that a wheel installed for the python3 on PATH, as a
// user's machine has it (plugins/pjrt/find_pjrt.py reads the distribution's
// file list; nothing is imported), or why there is none.
struct InstalledLibrary {
  std::string path;     // empty when missing
  std::string version;  // the distribution's
  std::string missing;  // why not, when missing
};

inline const InstalledLibrary& installed_pjrt_library(const std::string& distribution) {
  static std::mutex mutex;
  static std::map<std::string, InstalledLibrary> found;
  const std::lock_guard lock(mutex);
  auto known = found.find(distribution);
  if (known != found.end()) return known->second;
  const CommandResult result =
      run_command("python3 '" BP_TEST_SOURCE_DIR "/plugins/pjrt/find_pjrt.py' --library '" + distribution + "' 2>&1");
  InstalledLibrary library;
  if (result.exit_status == 0) {
    const auto newline = result.output.find('\n');
    library.path = result.output.substr(0, newline);
    library.version = result.output.substr(newline + 1);
    while (!library.version.empty() && library.version.back() == '\n') library.version.pop_back();
  } else {
    library.missing = result.output;
    while (!library.missing.empty() && library.missing.back() == '\n') library.missing.pop_back();
  }
  return found.emplace(distribution, std::move(library)).first->second;
}

// The CPU PJRT plugin (xla-cpu-pjrt), or empty after saying why the test is skipped.
inline std::string cpu_pjrt_library() {
  const InstalledLibrary& library = installed_pjrt_library("xla-cpu-pjrt");
  if (library.path.empty()) MESSAGE("skipped: " << library.missing << " (scripts/pip-test-packages installs it)");
  return library.path;
}

// THE ONE PLACE a PJRT backend is made: the core makes each PJRT library it
// is given its own backend `pjrt_<name>`; here the library is the source
// named "test" given in code (Runtime::Options::sources), and any other option
// (create.<key>, data_path) is that backend's option, as [backend.pjrt_test]
// would give it. The runtime also has the cpu plugin, to compare against,
// and nothing from the environment, a config file or Python packages.
inline constexpr std::string_view kPjrtBackend = "pjrt_test";

inline Runtime::Options pjrt_runtime_options(const std::string& library, const PjrtOptions& options = {},
                                             ProbeIsolation isolation = ProbeIsolation::kNone) {
  Runtime::Options made;
  made.plugin_paths = {BP_TEST_PJRT_PLUGIN, BP_TEST_CPU_PLUGIN};
  made.skip_default_paths = true;
  made.environment = std::map<std::string, std::string>{};
  made.probe_isolation = isolation;
  PluginSource source;
  source.kind = PluginSource::Kind::kPjrtLibrary;
  source.name = "test";
  source.path = library;
  made.sources.push_back(std::move(source));
  if (!options.empty()) made.backend_options[std::string(kPjrtBackend)] = options;
  return made;
}

inline Device pjrt_device(int ordinal = 0) { return Device{std::string(kPjrtBackend), ordinal}; }

// The same backend for the C API, from a config file: [pjrt.test] names the
// library, [backend.pjrt_test] gives the options with quoted keys
// (`"create.cpu_device_count" = "int64:2"`). The file is written to
// `directory` and read during the call.
inline bp_runtime* pjrt_c_runtime(const std::filesystem::path& directory, const std::string& library,
                                  const PjrtOptions& options = {}) {
  const std::filesystem::path config = directory / "pjrt.toml";
  {
    std::ofstream file(config);
    file << "[pjrt.test]\nlibrary = \"" << library << "\"\n";
    file << "[backend." << kPjrtBackend << "]\n";
    for (const auto& [key, value] : options) file << '"' << key << "\" = \"" << value << "\"\n";
  }
  const char* paths[] = {BP_TEST_PJRT_PLUGIN, BP_TEST_CPU_PLUGIN};
  bp_runtime_options made{};
  made.struct_size = sizeof(made);
  made.plugin_paths = paths;
  made.plugin_path_count = 2;
  made.config_file = config.c_str();
  made.ignore_environment = 1;
  made.skip_default_paths = 1;
  bp_runtime* runtime = nullptr;
  REQUIRE_MESSAGE(bp_runtime_create(&made, &runtime) == BP_OK, bp_last_error());
  std::size_t count = 0;
  REQUIRE(bp_backend_count(runtime, &count) == BP_OK);  // discovery reads the file now
  return runtime;
}

}  // namespace backplane::testing
