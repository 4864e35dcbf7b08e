// What the default-device tests share: runtimes over the build's plugins and
// the test fixtures, with an injected environment, and error capture.
#pragma once

#include "support/errors.hpp"

#include <backplane/backplane.hpp>

#include <doctest/doctest.h>

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace backplane::testing {

inline const std::filesystem::path kPluginDir = BP_TEST_PLUGIN_DIR;
inline const std::filesystem::path kFixtureDir = BP_TEST_FIXTURE_DIR;

// cpu with four devices, the simulated accelerator (priority above cpu) and
// the broken fixtures; no process environment, no config unless given.
inline Runtime::Options test_options(std::map<std::string, std::string> environment = {},
                                     std::optional<std::filesystem::path> config = std::nullopt) {
  Runtime::Options options;
  options.plugin_paths = {kPluginDir, kFixtureDir};
  options.skip_default_paths = true;
  options.environment = std::move(environment);
  options.config_file = std::move(config);
  options.backend_options["cpu"] = {{"devices", "4"}};
  return options;
}

}  // namespace backplane::testing
