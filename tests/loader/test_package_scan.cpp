// Installed Python packages found from their files alone, over fake site
// directories laid out as pip installs the real wheels.
#include "support/temp_dir.hpp"

#include "loader/package_scan.hpp"

#include <doctest/doctest.h>

#include <string>

using backplane::SearchOrigin;
using backplane::detail::PackageScan;
using backplane::detail::scan_python_packages;
using backplane::testing::TempDir;

namespace {

bool contains(const std::string& text, std::string_view part) { return text.find(part) != std::string::npos; }

// A distribution's dist-info with METADATA and entry_points.txt.
void dist_info(const TempDir& site, const std::string& directory, const std::string& metadata,
               const std::string& entry_points) {
  site.write(directory + "/METADATA", metadata);
  site.write(directory + "/entry_points.txt", entry_points);
  site.write(directory + "/RECORD", "");
}

}  // namespace

TEST_CASE("[packages] jax_plugins and xla_plugins entry points: name and version from METADATA, the one .so") {
  TempDir site;
  // As jax-cuda12-pjrt 0.12.0.1 and xla-cpu-pjrt 0.0.1 install.
  dist_info(site, "jax_cuda12_pjrt-0.12.0.1.dist-info",
            "Metadata-Version: 2.4\nName: jax-cuda12-pjrt\nVersion: 0.12.0.1\nSummary: JAX XLA PJRT Plugin\n\nbody\n",
            "[jax_plugins]\nxla_cuda12 = jax_plugins.xla_cuda12\n");
  site.write("jax_plugins/xla_cuda12/__init__.py", "raise SystemExit('never imported')\n");
  site.write("jax_plugins/xla_cuda12/version.py", "");
  site.write("jax_plugins/xla_cuda12/xla_cuda_plugin.so", "ELF");
  dist_info(site, "xla_cpu_pjrt-0.0.1.dist-info", "Metadata-Version: 2.1\nName: xla_cpu_pjrt\nVersion: 0.0.1\n",
            "[xla_plugins]\nxla_cpu_pjrt = xla_plugins.xla_cpu_pjrt\n");
  site.write("xla_plugins/xla_cpu_pjrt/__init__.py", "");
  site.write("xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so", "ELF");
  site.write("xla_plugins/xla_cpu_pjrt/include/pjrt_c_api.h", "");

  const PackageScan scan = scan_python_packages({site.path()});
  REQUIRE(scan.pjrt.size() == 2);
  CHECK(scan.pjrt[0].name == "xla_cuda12");
  CHECK(scan.pjrt[0].library == site / "jax_plugins/xla_cuda12/xla_cuda_plugin.so");
  CHECK(scan.pjrt[0].origin == SearchOrigin::kPackage);
  CHECK(scan.pjrt[0].origin_detail == "jax-cuda12-pjrt 0.12.0.1 (entry point jax_plugins:xla_cuda12)");
  CHECK(scan.pjrt[0].problem.empty());
  CHECK(scan.pjrt[1].name == "xla_cpu_pjrt");
  CHECK(scan.pjrt[1].library == site / "xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so");
  CHECK(scan.pjrt[1].origin_detail == "xla_cpu_pjrt 0.0.1 (entry point xla_plugins:xla_cpu_pjrt)");
  CHECK(scan.plugin_directories.empty());
  CHECK(scan.broken_plugins.empty());
}

TEST_CASE("[packages] a namespace package under jax_plugins/ that no entry point names is a PJRT source too") {
  TempDir site;
  dist_info(site, "claimed-1.0.dist-info", "Name: claimed\nVersion: 1.0\n",
            "[jax_plugins]\nclaimed = jax_plugins.claimed\n");
  site.write("jax_plugins/claimed/pjrt_claimed.so", "");
  site.write("jax_plugins/loose/loose_plugin.so", "");
  site.write("jax_plugins/__pycache__/x.so", "");
  site.write("jax_plugins/not_a_package.py", "");
  const PackageScan scan = scan_python_packages({site.path()});
  REQUIRE(scan.pjrt.size() == 2);
  CHECK(scan.pjrt[0].name == "claimed");
  CHECK(scan.pjrt[1].name == "loose");
  CHECK(scan.pjrt[1].library == site / "jax_plugins/loose/loose_plugin.so");
  CHECK(scan.pjrt[1].origin_detail == "namespace package jax_plugins.loose in " + site.path().string());
}

TEST_CASE("[packages] several .so: the one named for pjrt or plugin, else a problem listing what was found") {
  TempDir site;
  dist_info(site, "many-2.0.dist-info", "Name: many\nVersion: 2.0\n",
            "# comment\n[jax_plugins]\n; another\nchosen = jax_plugins.chosen\nunclear = jax_plugins.unclear\n"
            "none = jax_plugins.none\nnamed_none = jax_plugins.named_none\n");
  site.write("jax_plugins/chosen/libhelper.so", "");
  site.write("jax_plugins/chosen/chosen_pjrt.so", "");
  site.write("jax_plugins/unclear/a_plugin.so", "");
  site.write("jax_plugins/unclear/b_pjrt.so", "");
  site.write("jax_plugins/unclear/c.so", "");
  site.write("jax_plugins/none/__init__.py", "");
  site.write("jax_plugins/named_none/one.so", "");
  site.write("jax_plugins/named_none/two.so", "");
  const PackageScan scan = scan_python_packages({site.path()});
  REQUIRE(scan.pjrt.size() == 4);
  CHECK(scan.pjrt[0].library == site / "jax_plugins/chosen/chosen_pjrt.so");
  CHECK(scan.pjrt[0].problem.empty());
  CHECK(scan.pjrt[1].problem == "package directory " + (site / "jax_plugins/unclear").string() +
                                    " holds 3 .so files (a_plugin.so, b_pjrt.so, c.so), 2 of them named for pjrt or "
                                    "plugin (a_plugin.so, b_pjrt.so): which is the PJRT library cannot be told");
  CHECK(scan.pjrt[2].problem == "package directory " + (site / "jax_plugins/none").string() + " holds no .so file");
  CHECK(contains(scan.pjrt[3].problem, "holds 2 .so files (one.so, two.so), 0 of them named for pjrt or plugin:"));
}

TEST_CASE("[packages] an entry point whose package is missing, or a module file, is a source with a problem") {
  TempDir site;
  dist_info(site, "gone-0.1.dist-info", "Name: gone\nVersion: 0.1\n",
            "[xla_plugins]\ngone = xla_plugins.gone\nmodule = single_module:attr\nbad = ../escape\n");
  site.write("single_module.py", "");
  const PackageScan scan = scan_python_packages({site.path()});
  REQUIRE(scan.pjrt.size() == 3);
  CHECK(scan.pjrt[0].problem == "package xla_plugins.gone is not installed in " + site.path().string() +
                                    " (no directory " + (site / "xla_plugins/gone").string() + ")");
  CHECK(contains(scan.pjrt[1].problem, "module single_module is the file"));
  CHECK(contains(scan.pjrt[1].problem, "not a package directory"));
  CHECK(scan.pjrt[2].problem == "'../escape' is not a Python module name");
}

TEST_CASE("[packages] backplane.plugins: the package's directory joins the search path, named for its distribution") {
  TempDir site;
  dist_info(site, "backplane_vendor-1.2.3.dist-info", "Name: backplane-vendor\nVersion: 1.2.3\n",
            "[backplane.plugins]\nvendor = backplane_vendor\nmissing = not_installed\nempty = empty_package\n");
  site.write("backplane_vendor/backplane-vendor.so", "");
  site.write("backplane_vendor/__init__.py", "open('ran', 'w')\n");
  site.write("empty_package/__init__.py", "");
  const PackageScan scan = scan_python_packages({site.path()});
  REQUIRE(scan.plugin_directories.size() == 1);
  CHECK(scan.plugin_directories[0].path == site / "backplane_vendor");
  CHECK(scan.plugin_directories[0].origin == SearchOrigin::kPackage);
  CHECK(scan.plugin_directories[0].origin_detail == "backplane-vendor 1.2.3 (entry point backplane.plugins:vendor)");
  REQUIRE(scan.broken_plugins.size() == 2);
  CHECK(scan.broken_plugins[0].name == "missing");
  CHECK(scan.broken_plugins[0].reason ==
        "backplane-vendor 1.2.3 (entry point backplane.plugins:missing): package "
        "not_installed is not installed in " +
            site.path().string() + " (no directory " + (site / "not_installed").string() + ")");
  CHECK(scan.broken_plugins[1].name == "empty");
  CHECK(contains(scan.broken_plugins[1].reason, "holds no backplane-<name>.so"));
  CHECK(scan.pjrt.empty());
  CHECK_FALSE(std::filesystem::exists(site / "ran"));
}

TEST_CASE(
    "[packages] METADATA missing: name and version from the dist-info's name; site dirs once, missing ones skipped") {
  TempDir site;
  site.write("bare-3.1.dist-info/entry_points.txt", "[jax_plugins]\nbare = jax_plugins.bare\n");
  site.write("jax_plugins/bare/bare.so", "");
  const PackageScan scan = scan_python_packages({site.path(), site / "no-such-dir", site.path() / ".", ""});
  REQUIRE(scan.pjrt.size() == 1);
  CHECK(scan.pjrt[0].origin_detail == "bare 3.1 (entry point jax_plugins:bare)");
}

TEST_CASE("[packages] METADATA up to 1 MiB is read whole; a larger one is not read, and the dist-info's name stands") {
  // The scan reads each file into a buffer of its own size: the headers of a
  // METADATA whose long description takes it to the bound still count.
  const std::size_t bound = std::size_t{1} << 20;
  const std::string headers = "Metadata-Version: 2.1\nName: big-pjrt\nVersion: 9.9\n\n";
  TempDir site;
  dist_info(site, "big_pjrt-1.0.dist-info", headers + std::string(bound - headers.size(), 'x'),
            "[jax_plugins]\nbig = jax_plugins.big\n");
  site.write("jax_plugins/big/big.so", "");
  dist_info(site, "huge_pjrt-2.0.dist-info", headers + std::string(bound - headers.size() + 1, 'x'),
            "[jax_plugins]\nhuge = jax_plugins.huge\n");
  site.write("jax_plugins/huge/huge.so", "");
  const PackageScan scan = scan_python_packages({site.path()});
  REQUIRE(scan.pjrt.size() == 2);
  const auto& big = scan.pjrt[0].name == "big" ? scan.pjrt[0] : scan.pjrt[1];
  const auto& huge = scan.pjrt[0].name == "big" ? scan.pjrt[1] : scan.pjrt[0];
  CHECK(big.origin_detail == "big-pjrt 9.9 (entry point jax_plugins:big)");
  CHECK(huge.origin_detail == "huge_pjrt 2.0 (entry point jax_plugins:huge)");
}
