// Installed Python packages as plugin sources, found from their files alone:
// no Python code runs, no library is loaded (docs/configuration.md,
// "Plugins in Python packages").
//
// In each site directory (a Python interpreter's sys.path entry):
//   - every `*.dist-info/entry_points.txt`, for the groups `jax_plugins` and
//     `xla_plugins` (PJRT plugins, as JAX and XLA find them) and
//     `backplane.plugins` (backplane plugins), each entry named for its
//     distribution by the dist-info's METADATA (Name, Version);
//   - the namespace packages `jax_plugins/<pkg>/` that no entry point named.
// An entry point's module is resolved to a package directory of that site
// directory. A PJRT package's library is the one `.so` directly in it or,
// when there are several, the one whose name contains "pjrt" or "plugin". A
// backplane.plugins package's directory is searched for backplane-*.so.
#pragma once

#include "loader/pjrt_sources.hpp"
#include "loader/search_path.hpp"

#include <backplane/backplane.hpp>

#include <filesystem>
#include <string>
#include <vector>

namespace backplane::detail {

struct PackageScan {
  // jax_plugins and xla_plugins entries and namespace packages; one whose
  // library cannot be told has a problem saying what was found.
  std::vector<PjrtSource> pjrt;
  // backplane.plugins package directories: origin kPackage, the
  // distribution in origin_detail.
  std::vector<SearchPathEntry> plugin_directories;
  // backplane.plugins entries whose package is not installed, or holds no
  // backplane-*.so: listed failed.
  std::vector<BrokenPlugin> broken_plugins;
};

// Scans `site_directories` in order (a directory named twice, or one that
// does not exist, is skipped). Reads at most 1 MiB of each metadata file.
PackageScan scan_python_packages(const std::vector<std::filesystem::path>& site_directories);

}  // namespace backplane::detail
