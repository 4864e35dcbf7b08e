// The ordered plugin search path (docs/plugin-abi.md, "Discovery and statuses").
#pragma once

#include <backplane/backplane.hpp>

#include <filesystem>
#include <string>
#include <vector>

namespace backplane::detail {

class Environment;

// A plugin source that cannot be searched (a backplane.plugins entry whose
// package is missing, a broken source given in code): discovery lists it
// `failed` with `reason` under `name`, and opens nothing.
struct BrokenPlugin {
  std::string name;
  std::filesystem::path path;  // what it points at, when anything
  SearchOrigin origin = SearchOrigin::kCode;
  std::string origin_detail;
  std::string reason;
};

struct SearchPathInputs {
  std::vector<SearchPathEntry> from_code;
  std::vector<std::filesystem::path> from_config;
  // backplane.plugins package directories (and code's kPackage sources).
  std::vector<SearchPathEntry> from_packages;
  bool use_environment = true;
  bool use_default_dirs = true;
};

// Code, BACKPLANE_PLUGIN_PATH, config, packages, install dir, dir next to the
// core library. An entry naming the same place as an earlier one is dropped.
std::vector<SearchPathEntry> build_search_path(const SearchPathInputs& inputs, const Environment& environment);

// `<directory of the loaded core library>/backplane/plugins`.
std::filesystem::path plugin_dir_next_to_core();

}  // namespace backplane::detail
