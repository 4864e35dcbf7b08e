#include "loader/search_path.hpp"

#include "util/environment.hpp"
#include "util/log.hpp"

#include <dlfcn.h>

#include <set>
#include <string>
#include <string_view>
#include <system_error>

namespace backplane {

// Public (backplane.hpp), defined here with the search path it names.
std::string_view to_string(SearchOrigin origin) noexcept {
  switch (origin) {
    case SearchOrigin::kCode: return "code";
    case SearchOrigin::kEnvironment: return "BACKPLANE_PLUGIN_PATH";
    case SearchOrigin::kConfig: return "config";
    case SearchOrigin::kInstallDir: return "install";
    case SearchOrigin::kCoreDir: return "next to core";
    case SearchOrigin::kPackage: return "package";
  }
  return "unknown";
}

}  // namespace backplane

namespace backplane::detail {
namespace {

std::vector<std::filesystem::path> split_path_list(const std::string& text) {
  std::vector<std::filesystem::path> paths;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t end = text.find(':', start);
    if (end == std::string::npos) end = text.size();
    if (end > start) paths.emplace_back(text.substr(start, end - start));
    start = end + 1;
  }
  return paths;
}

// A stable identity for "the same place", also for paths that do not exist.
std::filesystem::path identity_of(const std::filesystem::path& path) {
  std::error_code error;
  auto canonical = std::filesystem::weakly_canonical(path, error);
  return error ? path.lexically_normal() : canonical;
}

}  // namespace

std::filesystem::path plugin_dir_next_to_core() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&plugin_dir_next_to_core), &info) == 0 || info.dli_fname == nullptr) {
    return {};
  }
  std::error_code error;
  auto library = std::filesystem::canonical(info.dli_fname, error);
  if (error) return {};
  return library.parent_path() / "backplane" / "plugins";
}

std::vector<SearchPathEntry> build_search_path(const SearchPathInputs& inputs, const Environment& environment) {
  std::vector<SearchPathEntry> candidates;
  for (const auto& entry : inputs.from_code) candidates.push_back(entry);
  if (inputs.use_environment) {
    if (auto value = environment.get("BACKPLANE_PLUGIN_PATH")) {
      for (auto& path : split_path_list(*value)) {
        candidates.push_back({std::move(path), SearchOrigin::kEnvironment, ""});
      }
    } else if (environment.elevated()) {
      log(LogLevel::kDebug, "elevated process: BACKPLANE_PLUGIN_PATH and other overrides are ignored");
    }
  }
  for (const auto& path : inputs.from_config) candidates.push_back({path, SearchOrigin::kConfig, ""});
  for (const auto& entry : inputs.from_packages) candidates.push_back(entry);
  if (inputs.use_default_dirs) {
    // Empty in the Python package, whose only home is next to the library.
    if (std::string_view install_dir = BACKPLANE_PLUGIN_INSTALL_DIR; !install_dir.empty()) {
      candidates.push_back({std::filesystem::path(install_dir), SearchOrigin::kInstallDir, ""});
    }
    if (auto next_to_core = plugin_dir_next_to_core(); !next_to_core.empty()) {
      candidates.push_back({next_to_core, SearchOrigin::kCoreDir, ""});
    }
  }

  std::vector<SearchPathEntry> search_path;
  std::set<std::filesystem::path> seen;
  for (auto& entry : candidates) {
    if (seen.insert(identity_of(entry.path)).second) {
      search_path.push_back(std::move(entry));
    } else {
      log(LogLevel::kDebug, "search path: {} ({}) already searched, dropped", entry.path.string(),
          to_string(entry.origin));
    }
  }
  return search_path;
}

}  // namespace backplane::detail
