// Where PJRT libraries come from: naming, create options, JAX's variable and
// the order of the sources.
#include "support/temp_dir.hpp"

#include "config/config.hpp"
#include "loader/pjrt_sources.hpp"

#include <doctest/doctest.h>

#include <string>

using backplane::PluginSource;
using backplane::SearchOrigin;
using backplane::detail::adapter_options;
using backplane::detail::checked_source;
using backplane::detail::collect_pjrt_sources;
using backplane::detail::Config;
using backplane::detail::create_option_problem;
using backplane::detail::Environment;
using backplane::detail::parse_pjrt_names_and_library_paths;
using backplane::detail::pjrt_backend_name;
using backplane::detail::PjrtSource;
using backplane::testing::TempDir;

namespace {

bool contains(const std::string& text, std::string_view part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("[pjrt sources] a source's backend is pjrt_ and its name lowercased, other characters made _") {
  CHECK(pjrt_backend_name("cpu") == "pjrt_cpu");
  CHECK(pjrt_backend_name("XLA-CPU") == "pjrt_xla_cpu");
  CHECK(pjrt_backend_name("xla_cuda12") == "pjrt_xla_cuda12");
  CHECK(pjrt_backend_name("my.plugin v2") == "pjrt_my_plugin_v2");
  CHECK(pjrt_backend_name("\xc3\x9cn\xc3\xaf") == "pjrt___n__");  // "Ünï": each byte outside [a-z0-9_] is one '_'
}

TEST_CASE("[pjrt sources] create options are typed: int64, bool, float, string, int64_list") {
  for (const char* good : {"int64:2", "int64:-9223372036854775808", "bool:true", "bool:false", "float:0.5",
                           "float:1e-3", "string:", "string:a:b", "int64_list:", "int64_list:1,-2,3"}) {
    CAPTURE(good);
    CHECK_FALSE(create_option_problem("key", good).has_value());
  }
  CHECK(create_option_problem("count", "2") ==
        "PJRT create option 'count' = '2' has no type; write <type>:<value> with type int64, bool, float, string or "
        "int64_list");
  CHECK(create_option_problem("count", "int64:two") ==
        "PJRT create option 'count' = 'int64:two': two is not a "
        "64-bit integer");
  CHECK(create_option_problem("flag", "bool:yes") ==
        "PJRT create option 'flag' = 'bool:yes': yes is not true or false");
  CHECK(create_option_problem("f", "float:") == "PJRT create option 'f' = 'float:': '' is not a 32-bit float");
  // The adapter's grammar, checked before the adapter sees it: PJRT floats
  // are 32-bit, so 1e39 is refused here, not first by backend_create.
  CHECK(create_option_problem("f", "float:1e39") ==
        "PJRT create option 'f' = 'float:1e39': 1e39 is not a 32-bit float");
  CHECK(create_option_problem("ids", "int64_list:1,,2") ==
        "PJRT create option 'ids' = 'int64_list:1,,2': 1,,2 is not a comma-separated list of 64-bit integers");
  CHECK(
      create_option_problem("x", "double:1") ==
      "PJRT create option 'x' = 'double:1': unknown type 'double'; expected int64, bool, float, string or int64_list");
  CHECK(create_option_problem("", "int64:1") == "a PJRT create option has an empty name");
}

TEST_CASE(
    "[pjrt sources] the adapter's options: the backend's name, library (absolute), then create.KEY=TYPE:VALUE in "
    "order") {
  PjrtSource source;
  source.name = "XLA-CPU";
  source.library = "relative/lib.so";
  source.create_options = {{"cpu_device_count", "int64:2"}, {"preallocate", "bool:false"}};
  const auto options = adapter_options(source);
  REQUIRE(options.size() == 4);
  CHECK(options[0] == std::pair<std::string, std::string>{"backend", "pjrt_xla_cpu"});
  CHECK(options[1].first == "library");
  CHECK(std::filesystem::path(options[1].second).is_absolute());
  CHECK(options[1].second.ends_with("relative/lib.so"));
  CHECK(options[2] == std::pair<std::string, std::string>{"create.cpu_device_count", "int64:2"});
  CHECK(options[3] == std::pair<std::string, std::string>{"create.preallocate", "bool:false"});
}

TEST_CASE("[pjrt sources] a source without a name or path, with a bad option or too long a name, has a problem") {
  PjrtSource nameless;
  nameless.library = "/x/lib.so";
  CHECK(checked_source(nameless).problem == "the PJRT library /x/lib.so has no name");
  PjrtSource pathless;
  pathless.name = "cpu";
  CHECK(checked_source(pathless).problem == "the PJRT library 'cpu' has no path");
  PjrtSource long_name;
  long_name.name = std::string(60, 'a');
  long_name.library = "/x/lib.so";
  CHECK(contains(checked_source(long_name).problem, "is longer than 64 bytes"));
  PjrtSource bad_option;
  bad_option.name = "cpu";
  bad_option.library = "/x/lib.so";
  bad_option.create_options = {{"n", "int64:x"}};
  const PjrtSource checked = checked_source(bad_option);
  CHECK(checked.backend == "pjrt_cpu");
  CHECK(checked.problem == "PJRT create option 'n' = 'int64:x': x is not a 64-bit integer");
}

TEST_CASE("[pjrt sources] PJRT_NAMES_AND_LIBRARY_PATHS: name:path pairs; a malformed entry is a warning naming it") {
  const auto parsed =
      parse_pjrt_names_and_library_paths("cpu:/opt/cpu.so,broken,:/no/name.so,gpu:/opt/gpu:v2.so,empty:,");
  REQUIRE(parsed.sources.size() == 2);
  CHECK(parsed.sources[0].name == "cpu");
  CHECK(parsed.sources[0].library == "/opt/cpu.so");
  CHECK(parsed.sources[0].origin == SearchOrigin::kEnvironment);
  CHECK(parsed.sources[0].origin_detail == "PJRT_NAMES_AND_LIBRARY_PATHS");
  CHECK(parsed.sources[1].name == "gpu");
  CHECK(parsed.sources[1].library == "/opt/gpu:v2.so");  // the first ':' ends the name
  REQUIRE(parsed.warnings.size() == 3);
  CHECK(parsed.warnings[0] ==
        "PJRT_NAMES_AND_LIBRARY_PATHS: entry 'broken' ignored: expected NAME:PATH (comma-separated entries)");
  CHECK(contains(parsed.warnings[1], "entry ':/no/name.so' ignored"));
  CHECK(contains(parsed.warnings[2], "entry 'empty:' ignored"));
}

TEST_CASE("[pjrt sources] code, then the config file, then the environment, then packages; each says where from") {
  TempDir dir;
  const Config config =
      backplane::detail::parse_config("[pjrt.from_config]\nlibrary = \"lib/c.so\"\n", dir / "config.toml");
  PluginSource code;
  code.name = "from_code";
  code.path = "/code/lib.so";
  PluginSource plugin_path;  // not a PJRT library: not listed here
  plugin_path.kind = PluginSource::Kind::kPluginPath;
  plugin_path.path = "/plugins";
  PjrtSource package;
  package.name = "from_package";
  package.library = "/site/p/lib.so";
  package.origin = SearchOrigin::kPackage;
  package.origin_detail = "pkg 1.0 (entry point jax_plugins:from_package)";
  const auto environment = Environment::fixed({{"PJRT_NAMES_AND_LIBRARY_PATHS", "from_env:/env/lib.so,junk"}});

  const auto collected = collect_pjrt_sources({code, plugin_path}, config, environment, true, {package}, {"/site"});
  REQUIRE(collected.sources.size() == 4);
  CHECK(collected.sources[0].backend == "pjrt_from_code");
  CHECK(collected.sources[0].origin == SearchOrigin::kCode);
  CHECK(collected.sources[0].origin_detail == "Runtime::Options::sources");
  CHECK(collected.sources[1].backend == "pjrt_from_config");
  CHECK(collected.sources[1].library == dir / "lib/c.so");
  CHECK(collected.sources[1].origin_detail == "config " + (dir / "config.toml").string() + ":1:1 [pjrt.from_config]");
  CHECK(collected.sources[2].backend == "pjrt_from_env");
  CHECK(collected.sources[3].backend == "pjrt_from_package");
  CHECK(collected.sources[3].origin_detail == "pkg 1.0 (entry point jax_plugins:from_package)");
  REQUIRE(collected.warnings.size() == 1);
  CHECK(contains(collected.warnings[0], "entry 'junk' ignored"));
  CHECK(contains(collected.searched, "Runtime::Options::sources"));
  CHECK(contains(collected.searched, "[pjrt.NAME] tables in " + (dir / "config.toml").string()));
  CHECK(contains(collected.searched, "the jax_plugins and xla_plugins packages of /site"));

  const auto without_environment = collect_pjrt_sources({}, Config{}, environment, false, {}, {});
  CHECK(without_environment.sources.empty());
  CHECK(without_environment.searched ==
        "Runtime::Options::sources, [pjrt.NAME] tables (no config file), PJRT_NAMES_AND_LIBRARY_PATHS (environment "
        "ignored), Python packages (no site directories given)");
}
