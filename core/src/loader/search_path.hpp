// The ordered plugin search path (docs/plugin-abi.md, "Discovery and statuses").
#pragma once

#include <backplane/backplane.hpp>

#include <filesystem>
#include <vector>

namespace backplane::detail {

class Environment;

struct SearchPathInputs {
  std::vector<std::filesystem::path> from_code;
  std::vector<std::filesystem::path> from_config;
  bool use_environment = true;
  bool use_default_dirs = true;
};

// Code, BACKPLANE_PLUGIN_PATH, config, install dir, dir next to the core
// library. An entry naming the same place as an earlier one is dropped.
std::vector<SearchPathEntry> build_search_path(const SearchPathInputs& inputs, const Environment& environment);

// `<directory of the loaded core library>/backplane/plugins`.
std::filesystem::path plugin_dir_next_to_core();

}  // namespace backplane::detail
