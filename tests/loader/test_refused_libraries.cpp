// A plugin library the loader refuses stays loaded for as long as the caller
// holds it: discovery drops refused libraries only once a wave's threads are
// done, since one unloaded while another thread maps the next plugin may hand
// that plugin its addresses, which ThreadSanitizer reads as a race.
#include "support/loaded_library.hpp"

#include "loader/plugin_library.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <string>

using backplane::BackendStatus;
using backplane::detail::open_plugin;
using backplane::detail::OpenedPlugin;
using backplane::testing::is_loaded;

TEST_CASE("[loader] a refused library is unloaded when the caller drops it, not before") {
  for (const std::string name : {"no_entry", "short_table", "name_mismatch"}) {
    CAPTURE(name);
    const auto file =
        std::filesystem::absolute(std::filesystem::path(BP_TEST_FIXTURE_DIR) / ("backplane-" + name + ".so"));
    REQUIRE_FALSE(is_loaded(file));
    OpenedPlugin opened = open_plugin(file, name == "name_mismatch" ? "name_mismatch" : "");
    CHECK(opened.status != BackendStatus::kAvailable);
    CHECK(opened.library == nullptr);
    REQUIRE(opened.refused_library != nullptr);
    CHECK(is_loaded(file));
    opened.refused_library.reset();
    CHECK_FALSE(is_loaded(file));
  }
}

TEST_CASE("[loader] a file that never loaded leaves nothing to drop") {
  const OpenedPlugin opened = open_plugin(std::filesystem::path(BP_TEST_FIXTURE_DIR) / "backplane-absent.so", "");
  CHECK(opened.status == BackendStatus::kFailed);
  CHECK(opened.refused_library == nullptr);
  CHECK(opened.reason.find("cannot load") != std::string::npos);
}
