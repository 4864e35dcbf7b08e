// The config file's [pjrt.NAME] tables (core/src/config/pjrt_config.hpp):
// libraries and their create options, with file:line:col errors.
#include <doctest/doctest.h>

#include <string>
#include <utility>
#include <vector>

#include "backplane/error.hpp"
#include "config/config.hpp"

using backplane::Error;
using backplane::ErrorCode;
using backplane::detail::Config;
using backplane::detail::parse_config;

namespace {

using Options = std::vector<std::pair<std::string, std::string>>;

std::string pjrt_error(std::string_view text) {
  try {
    parse_config(text, "/etc/FILE.toml");
  } catch (const Error& error) {
    CHECK(error.code() == ErrorCode::kConfig);
    return error.what();
  }
  FAIL("parsing did not fail");
  return {};
}

}  // namespace

TEST_CASE("[config] [pjrt.NAME]: the library (relative to the file) and typed options, in file order") {
  const Config config = parse_config(
      "[pjrt.cpu]\n"
      "library = \"plugins/xla_cpu_pjrt.so\"\n"
      "options = { cpu_device_count = 2, name = \"x:y\", ratio = 0.5, flag = true, ids = [3, 1, 2], none = [] }\n"
      "\n"
      "[pjrt.GPU-1]\n"
      "library = '/opt/pjrt/cuda.so'\n"
      "[pjrt.GPU-1.options]\n"
      "preallocate = false\n"
      "memory_fraction = 0.25\n",
      "/etc/backplane/config.toml");
  REQUIRE(config.pjrt.size() == 2);
  CHECK(config.pjrt[0].name == "cpu");
  CHECK(config.pjrt[0].library == "/etc/backplane/plugins/xla_cpu_pjrt.so");
  CHECK(config.pjrt[0].where == "/etc/backplane/config.toml:1:1");
  CHECK(config.pjrt[0].options == Options{{"cpu_device_count", "int64:2"},
                                          {"name", "string:x:y"},
                                          {"ratio", "float:0.5"},
                                          {"flag", "bool:true"},
                                          {"ids", "int64_list:3,1,2"},
                                          {"none", "int64_list:"}});
  CHECK(config.pjrt[1].name == "GPU-1");
  CHECK(config.pjrt[1].library == "/opt/pjrt/cuda.so");
  CHECK(config.pjrt[1].where == "/etc/backplane/config.toml:5:1");
  CHECK(config.pjrt[1].options == Options{{"preallocate", "bool:false"}, {"memory_fraction", "float:0.25"}});
  CHECK(config.warnings.empty());
}

TEST_CASE("[config] [pjrt.NAME] errors name the file, line, column and the key") {
  CHECK(pjrt_error("[pjrt.cpu]\noptions = {}\n") ==
        "/etc/FILE.toml:1:1: [pjrt.cpu] has no 'library' (the path of the PJRT plugin library)");
  CHECK(pjrt_error("[pjrt.cpu]\nlibrary = 3\n") ==
        "/etc/FILE.toml:2:11: 'pjrt.cpu.library' must be a string (the path of the PJRT plugin library), got integer");
  CHECK(pjrt_error("[pjrt.cpu]\nlibrary = \"\"\n") ==
        "/etc/FILE.toml:2:11: 'pjrt.cpu.library' is empty; expected the library's path");
  CHECK(pjrt_error("[pjrt.cpu]\nlibrary = \"/x.so\"\nlibary = \"/y.so\"\n") ==
        "/etc/FILE.toml:3:10: 'pjrt.cpu.libary': unknown key 'libary'; [pjrt.cpu] takes 'library' and 'options'");
  CHECK(pjrt_error("[pjrt.cpu]\nlibrary = \"/x.so\"\noptions = 1\n") ==
        "/etc/FILE.toml:3:11: 'pjrt.cpu.options' must be a table of PJRT create options, got integer");
  CHECK(pjrt_error("[pjrt.cpu]\nlibrary = \"/x.so\"\noptions = { when = 1979-05-27 }\n") ==
        "/etc/FILE.toml:3:20: option 'pjrt.cpu.options.when' must be a string, integer, float, boolean or array of "
        "integers, got date");
  CHECK(pjrt_error("[pjrt.cpu]\nlibrary = \"/x.so\"\noptions = { ids = [1, \"two\"] }\n") ==
        "/etc/FILE.toml:3:23: option 'pjrt.cpu.options.ids' must be an array of integers (PJRT's int64 list), got "
        "string at index 1");
  CHECK(pjrt_error("[pjrt.cpu]\nlibrary = \"/x.so\"\noptions = { t = { a = 1 } }\n") ==
        "/etc/FILE.toml:3:17: option 'pjrt.cpu.options.t' must be a string, integer, float, boolean or array of "
        "integers, got table");
  CHECK(pjrt_error("[pjrt.cpu]\nlibrary = \"/x.so\"\noptions = { s = \"a\\u0000b\" }\n") ==
        "/etc/FILE.toml:3:17: option 'pjrt.cpu.options.s' = \"a\\u0000b\" contains a NUL character (\\u0000)");
  CHECK(pjrt_error("[pjrt.cpu]\nlibrary = \"/opt/x.so\\u0000junk\"\n") ==
        "/etc/FILE.toml:2:11: 'pjrt.cpu.library' = \"/opt/x.so\\u0000junk\" contains a NUL character (\\u0000), which "
        "no file path can hold");
  CHECK(pjrt_error("pjrt = 1\n") == "/etc/FILE.toml:1:8: 'pjrt' must be a table of [pjrt.NAME] tables, got integer");
  CHECK(pjrt_error("[pjrt]\ncpu = \"/x.so\"\n") == "/etc/FILE.toml:2:7: 'pjrt.cpu' must be a table, got string");
  CHECK(pjrt_error("[pjrt.\"\"]\nlibrary = \"/x.so\"\n") ==
        "/etc/FILE.toml:1:1: 'pjrt.\"\"': the PJRT plugin's name is empty");
}

TEST_CASE("[config] a misspelt pjrt key is a warning that suggests it") {
  const Config config = parse_config("pjtr = 1\n", "/etc/FILE.toml");
  REQUIRE(config.warnings.size() == 1);
  CHECK(config.warnings[0] == "/etc/FILE.toml:1:8: unknown top-level key 'pjtr' ignored (did you mean 'pjrt'?)");
}
