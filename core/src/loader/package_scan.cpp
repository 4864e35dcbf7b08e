#include "loader/package_scan.hpp"

#include "util/log.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <optional>
#include <set>
#include <string_view>
#include <system_error>
#include <utility>

namespace backplane::detail {
namespace fs = std::filesystem;
namespace {

constexpr std::size_t kMaxMetadataBytes = std::size_t{1} << 20;
constexpr std::string_view kPluginGroup = "backplane.plugins";

std::string_view trimmed(std::string_view text) {
  const auto first = text.find_first_not_of(" \t\r");
  if (first == std::string_view::npos) return {};
  const auto last = text.find_last_not_of(" \t\r");
  return text.substr(first, last - first + 1);
}

// The file's text, or nullopt when it is missing, unreadable or too large.
// The buffer is the file's own size: every Python process pays this scan at
// its first runtime use, once per installed distribution, and a buffer of the
// bound's size, zero-filled each time, was most of `backplane info` on a site
// directory of thousands of distributions.
std::optional<std::string> read_small_file(const fs::path& path) {
  std::error_code error;
  if (!fs::is_regular_file(path, error)) return std::nullopt;
  const std::uintmax_t size = fs::file_size(path, error);
  if (error) return std::nullopt;
  if (size > kMaxMetadataBytes) {
    log(LogLevel::kWarn, "{}: larger than {} bytes; not read", path.string(), kMaxMetadataBytes);
    return std::nullopt;
  }
  std::ifstream stream(path, std::ios::binary);
  if (!stream) return std::nullopt;
  // A file that grew since is read as long as it was then.
  std::string text(static_cast<std::size_t>(size), '\0');
  stream.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(stream.gcount()));
  return text;
}

struct Distribution {
  std::string name;
  std::string version;
  std::string describe() const { return version.empty() ? name : fmt::format("{} {}", name, version); }
};

// Name and Version from METADATA's headers, else from the directory's name
// (<name>-<version>.dist-info).
Distribution read_distribution(const fs::path& dist_info) {
  Distribution distribution;
  const std::string stem = dist_info.stem().string();
  const std::size_t dash = stem.find('-');
  distribution.name = stem.substr(0, dash);
  if (dash != std::string::npos) distribution.version = stem.substr(dash + 1);
  const auto text = read_small_file(dist_info / "METADATA");
  if (!text) return distribution;
  std::string_view rest(*text);
  while (!rest.empty()) {
    const std::size_t end = rest.find('\n');
    const std::string_view line = trimmed(rest.substr(0, end));
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
    if (line.empty()) break;  // the headers end at the first empty line
    if (line.starts_with("Name:")) distribution.name = std::string(trimmed(line.substr(5)));
    if (line.starts_with("Version:")) distribution.version = std::string(trimmed(line.substr(8)));
  }
  return distribution;
}

struct EntryPoint {
  std::string group;
  std::string name;
  std::string module;  // the value up to ':' or an extras list
};

std::vector<EntryPoint> read_entry_points(const fs::path& file) {
  std::vector<EntryPoint> entries;
  const auto text = read_small_file(file);
  if (!text) return entries;
  std::string group;
  std::string_view rest(*text);
  while (!rest.empty()) {
    const std::size_t end = rest.find('\n');
    const std::string_view line = trimmed(rest.substr(0, end));
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
    if (line.empty() || line.front() == '#' || line.front() == ';') continue;
    if (line.front() == '[' && line.back() == ']') {
      group = std::string(trimmed(line.substr(1, line.size() - 2)));
      continue;
    }
    const std::size_t equals = line.find('=');
    if (equals == std::string_view::npos || group.empty()) continue;
    std::string_view value = trimmed(line.substr(equals + 1));
    value = trimmed(value.substr(0, value.find_first_of(":[")));
    entries.push_back({group, std::string(trimmed(line.substr(0, equals))), std::string(value)});
  }
  return entries;
}

bool is_identifier(std::string_view part) {
  if (part.empty() || (part.front() >= '0' && part.front() <= '9')) return false;
  return std::all_of(part.begin(), part.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  });
}

// The directory of package `module` ("jax_plugins.xla_cuda12") in `site`,
// or the reason there is none.
std::pair<fs::path, std::string> package_directory(const fs::path& site, std::string_view module) {
  fs::path directory = site;
  std::string_view rest = module;
  while (true) {
    const std::size_t dot = rest.find('.');
    const std::string_view part = rest.substr(0, dot);
    if (!is_identifier(part)) return {{}, fmt::format("'{}' is not a Python module name", module)};
    directory /= std::string(part);
    if (dot == std::string_view::npos) break;
    rest = rest.substr(dot + 1);
  }
  std::error_code error;
  if (fs::is_directory(directory, error)) return {directory, ""};
  fs::path module_file = directory;
  module_file += ".py";
  if (fs::exists(module_file, error)) {
    return {{},
            fmt::format("module {} is the file {}, not a package directory; its library cannot be found without "
                        "running it",
                        module, module_file.string())};
  }
  return {
      {},
      fmt::format("package {} is not installed in {} (no directory {})", module, site.string(), directory.string())};
}

fs::path identity(const fs::path& path) {
  std::error_code error;
  fs::path canonical = fs::weakly_canonical(path, error);
  return error ? path.lexically_normal() : canonical;
}

bool contains(std::string_view text, std::string_view part) { return text.find(part) != std::string_view::npos; }

// The PJRT library of a package directory, or why it cannot be told.
std::pair<fs::path, std::string> pjrt_library_in(const fs::path& directory) {
  std::vector<fs::path> libraries;
  std::error_code error;
  for (const auto& item : fs::directory_iterator(directory, error)) {
    if (item.path().extension() == ".so" && item.is_regular_file(error)) libraries.push_back(item.path());
  }
  std::sort(libraries.begin(), libraries.end());
  auto names = [](const std::vector<fs::path>& paths) {
    std::vector<std::string> listed;
    for (const auto& path : paths) listed.push_back(path.filename().string());
    return fmt::format("{}", fmt::join(listed, ", "));
  };
  if (libraries.size() == 1) return {libraries.front(), ""};
  if (libraries.empty()) return {{}, fmt::format("package directory {} holds no .so file", directory.string())};
  std::vector<fs::path> named;
  for (const auto& library : libraries) {
    const std::string name = library.filename().string();
    if (contains(name, "pjrt") || contains(name, "plugin")) named.push_back(library);
  }
  if (named.size() == 1) return {named.front(), ""};
  return {{},
          fmt::format("package directory {} holds {} .so files ({}), {} of them named for pjrt or plugin{}: which is "
                      "the PJRT library cannot be told",
                      directory.string(), libraries.size(), names(libraries), named.size(),
                      named.empty() ? std::string() : " (" + names(named) + ")")};
}

bool holds_plugins(const fs::path& directory) {
  std::error_code error;
  for (const auto& item : fs::directory_iterator(directory, error)) {
    const std::string name = item.path().filename().string();
    if (name.starts_with("backplane-") && name.ends_with(".so")) return true;
  }
  return false;
}

class Scanner {
 public:
  explicit Scanner(PackageScan& scan) : scan_(scan) {}

  void site(const fs::path& site) {
    std::vector<fs::path> dist_infos;
    std::error_code error;
    for (const auto& item : fs::directory_iterator(site, error)) {
      if (item.path().extension() == ".dist-info" && item.is_directory(error)) dist_infos.push_back(item.path());
    }
    std::sort(dist_infos.begin(), dist_infos.end());
    for (const auto& dist_info : dist_infos) distribution(site, dist_info);
    namespace_packages(site);
  }

 private:
  void distribution(const fs::path& site, const fs::path& dist_info) {
    const std::vector<EntryPoint> entries = read_entry_points(dist_info / "entry_points.txt");
    if (entries.empty()) return;
    const Distribution distribution = read_distribution(dist_info);
    for (const EntryPoint& entry : entries) {
      if (entry.group != "jax_plugins" && entry.group != "xla_plugins" && entry.group != kPluginGroup) continue;
      const std::string detail =
          fmt::format("{} (entry point {}:{})", distribution.describe(), entry.group, entry.name);
      auto [directory, problem] = package_directory(site, entry.module);
      if (!directory.empty()) claimed_.insert(identity(directory));
      if (entry.group == kPluginGroup) {
        plugin_package(entry, detail, directory, problem);
        continue;
      }
      PjrtSource source;
      source.name = entry.name;
      source.origin = SearchOrigin::kPackage;
      source.origin_detail = detail;
      if (directory.empty()) {
        source.library = site / entry.module;
        source.problem = problem;
      } else {
        std::tie(source.library, source.problem) = pjrt_library_in(directory);
        if (source.library.empty()) source.library = directory;
      }
      scan_.pjrt.push_back(std::move(source));
    }
  }

  void plugin_package(const EntryPoint& entry, const std::string& detail, const fs::path& directory,
                      const std::string& problem) {
    if (directory.empty() || !holds_plugins(directory)) {
      const std::string why =
          directory.empty() ? problem
                            : fmt::format("package directory {} holds no backplane-<name>.so", directory.string());
      scan_.broken_plugins.push_back(
          {entry.name, directory, SearchOrigin::kPackage, detail, fmt::format("{}: {}", detail, why)});
      return;
    }
    scan_.plugin_directories.push_back({directory, SearchOrigin::kPackage, detail});
  }

  // jax_plugins/<pkg>/ that no entry point named, as JAX finds them.
  void namespace_packages(const fs::path& site) {
    const fs::path root = site / "jax_plugins";
    std::vector<fs::path> packages;
    std::error_code error;
    for (const auto& item : fs::directory_iterator(root, error)) {
      const std::string name = item.path().filename().string();
      if (!item.is_directory(error) || !is_identifier(name) || name == "__pycache__") continue;
      if (claimed_.contains(identity(item.path()))) continue;
      packages.push_back(item.path());
    }
    std::sort(packages.begin(), packages.end());
    for (const auto& package : packages) {
      PjrtSource source;
      source.name = package.filename().string();
      source.origin = SearchOrigin::kPackage;
      source.origin_detail =
          fmt::format("namespace package jax_plugins.{} in {}", package.filename().string(), site.string());
      std::tie(source.library, source.problem) = pjrt_library_in(package);
      if (source.library.empty()) source.library = package;
      scan_.pjrt.push_back(std::move(source));
    }
  }

  PackageScan& scan_;
  std::set<fs::path> claimed_;  // package directories an entry point named
};

}  // namespace

PackageScan scan_python_packages(const std::vector<fs::path>& site_directories) {
  PackageScan scan;
  Scanner scanner(scan);
  std::set<fs::path> seen;
  for (const auto& site : site_directories) {
    std::error_code error;
    if (site.empty() || !fs::is_directory(site, error)) continue;
    if (!seen.insert(identity(site)).second) continue;
    scanner.site(site);
  }
  return scan;
}

}  // namespace backplane::detail
