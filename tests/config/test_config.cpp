// The config file reader and its search order (core/src/config/config.hpp).
#include <doctest/doctest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "backplane/error.hpp"
#include "config/config.hpp"

namespace fs = std::filesystem;
using backplane::Error;
using backplane::ErrorCode;
using backplane::detail::Config;
using backplane::detail::Environment;
using backplane::detail::load_config;
using backplane::detail::parse_config;

namespace {

using Options = std::vector<std::pair<std::string, std::string>>;

// A fresh directory, removed with its contents at scope exit.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "backplane-config-XXXXXX").string();
    REQUIRE(mkdtemp(pattern.data()) != nullptr);
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const fs::path& path() const { return path_; }

  // Writes `text` to `relative` (creating directories) and returns its path.
  fs::path write(const fs::path& relative, std::string_view text) const {
    const fs::path file = path_ / relative;
    fs::create_directories(file.parent_path());
    std::ofstream(file, std::ios::binary) << text;
    return file;
  }

 private:
  fs::path path_;
};

// The message of the Error(kConfig) that parsing `text` as FILE throws.
std::string config_error(std::string_view text) {
  try {
    parse_config(text, "/etc/FILE.toml");
  } catch (const Error& error) {
    CHECK(error.code() == ErrorCode::kConfig);
    return error.what();
  }
  FAIL("parse_config accepted: " << std::string(text));
  return {};
}

Error load_error(const Environment& environment, const fs::path& sysconf) {
  try {
    load_config(environment, sysconf);
  } catch (const Error& error) {
    return error;
  }
  FAIL("load_config did not throw");
  return Error(ErrorCode::kInternal, "");
}

}  // namespace

TEST_SUITE("config") {
  TEST_CASE("[config] empty text gives an empty config") {
    const Config config = parse_config("", "/etc/FILE.toml");
    CHECK(config.path == fs::path("/etc/FILE.toml"));
    CHECK(config.plugin_paths.empty());
    CHECK_FALSE(config.backends.has_value());
    CHECK_FALSE(config.default_device.has_value());
    CHECK(config.backend.empty());
    CHECK(config.warnings.empty());
  }

  TEST_CASE("[config] reads every key") {
    const Config config = parse_config(R"(# backplane config
plugin_paths = ["/opt/vendor/plugins", "plugins", "../shared/x.so"]
backends = ["cuda", "cpu"]
default_device = "cuda:1"

[backend.cuda]
enabled = false
priority = -5

[backend.cpu]
priority = 200
devices = 4
)",
                                       "/etc/backplane/config.toml");
    CHECK(config.plugin_paths ==
          std::vector<fs::path>{"/opt/vendor/plugins", "/etc/backplane/plugins", "/etc/shared/x.so"});
    REQUIRE(config.backends.has_value());
    CHECK(*config.backends == std::vector<std::string>{"cuda", "cpu"});
    CHECK(config.default_device == "cuda:1");
    REQUIRE(config.backend.size() == 2);
    CHECK(config.backend.at("cuda").enabled == false);
    CHECK(config.backend.at("cuda").priority == -5);
    CHECK(config.backend.at("cuda").options.empty());
    CHECK_FALSE(config.backend.at("cpu").enabled.has_value());
    CHECK(config.backend.at("cpu").priority == 200);
    CHECK(config.backend.at("cpu").options == Options{{"devices", "4"}});
    CHECK(config.warnings.empty());
  }

  TEST_CASE("[config] plugin options come out as strings, in file order") {
    const Config config = parse_config(R"([backend.cpu]
devices = 4
name = "sim"
ratio = 0.5
whole = 3.0
big = 1e300
flag = true
off = false
hex = 0x10
forever = inf
"quoted key" = "v"
)",
                                       "/etc/FILE.toml");
    CHECK(config.backend.at("cpu").options == Options{{"devices", "4"},
                                                      {"name", "sim"},
                                                      {"ratio", "0.5"},
                                                      {"whole", "3.0"},
                                                      {"big", "1e+300"},
                                                      {"flag", "true"},
                                                      {"off", "false"},
                                                      {"hex", "16"},
                                                      {"forever", "inf"},
                                                      {"quoted key", "v"}});
  }

  TEST_CASE("[config] syntax error names file, line and column") {
    const std::string message = config_error("backends = [\"cpu\"]\ndefault_device = = \"cpu\"\n");
    CHECK(message.find("/etc/FILE.toml:2:") == 0);
    CHECK(message.find("TOML syntax error: ") != std::string::npos);
    // toml++'s own description follows.
    CHECK(message.size() > std::string("/etc/FILE.toml:2:1: TOML syntax error: ").size());

    CHECK(config_error("[backend.cpu]\ndevices = 4\ndevices = 5\n").find("/etc/FILE.toml:3:") == 0);  // duplicate
    CHECK(config_error("x = \"unterminated\n").find("/etc/FILE.toml:1:") == 0);
  }

  TEST_CASE("[config] syntax error columns count the original text, not the guard's escapes") {
    // 'y' is at column 10; the guard rewrites each 'é' to a 6-character escape.
    const std::string message = config_error("[backend.cpu]\nk = \"\xC3\xA9\xC3\xA9\" y\n");
    CHECK(message.find("/etc/FILE.toml:2:10: TOML syntax error: ") == 0);
  }

  TEST_CASE("[config] wrong types name the key and the expected type") {
    CHECK(config_error("\n\nbackends = 3") ==
          "/etc/FILE.toml:3:12: 'backends' must be an array of strings, got integer");
    CHECK(config_error("backends = [\"cpu\", 1]") ==
          "/etc/FILE.toml:1:20: 'backends' must be an array of strings, got integer at index 1");
    CHECK(config_error("plugin_paths = \"/opt\"") ==
          "/etc/FILE.toml:1:16: 'plugin_paths' must be an array of strings, got string");
    CHECK(config_error("default_device = 0") == "/etc/FILE.toml:1:18: 'default_device' must be a string, got integer");
    CHECK(config_error("backend = 1") ==
          "/etc/FILE.toml:1:11: 'backend' must be a table of [backend.NAME] tables, got integer");
    CHECK(config_error("[backend]\ncpu = 1") == "/etc/FILE.toml:2:7: 'backend.cpu' must be a table, got integer");
    CHECK(config_error("[backend.cpu]\nenabled = \"yes\"") ==
          "/etc/FILE.toml:2:11: 'backend.cpu.enabled' must be a boolean, got string");
    CHECK(config_error("[backend.cpu]\npriority = 1.5") ==
          "/etc/FILE.toml:2:12: 'backend.cpu.priority' must be an integer, got float");
    CHECK(config_error("[backend.cpu]\npriority = 10000000000") ==
          "/etc/FILE.toml:2:12: 'backend.cpu.priority' must be an integer from -2147483648 to 2147483647, got "
          "10000000000");
  }

  TEST_CASE("[config] option values that are arrays, tables or dates are errors") {
    CHECK(config_error("[backend.cpu]\nlist = [1, 2]") ==
          "/etc/FILE.toml:2:8: option 'backend.cpu.list' must be a string, integer, float or boolean, got array");
    CHECK(config_error("[backend.cpu]\nsub = { a = 1 }")
              .find("/etc/FILE.toml:2:7: option 'backend.cpu.sub' must be a string, integer, float or boolean, got "
                    "table") == 0);
    CHECK(config_error("[backend.cpu]\nwhen = 2024-01-01").find("option 'backend.cpu.when'") != std::string::npos);
    CHECK(config_error("[backend.cpu]\nwhen = 2024-01-01").find("got date") != std::string::npos);
  }

  TEST_CASE("[config] a NUL in an option name or value is refused where it is, not cut short") {
    CHECK(config_error("[backend.cpu]\ndevices = \"2\\u0000x\"") ==
          "/etc/FILE.toml:2:11: option 'backend.cpu.devices' = \"2\\u0000x\" contains a NUL character (\\u0000)");
    CHECK(config_error("[backend.cpu]\n\"dev\\u0000ices\" = 2") ==
          "/etc/FILE.toml:2:19: option name 'backend.cpu.dev\\u0000ices' contains a NUL character (\\u0000)");
  }

  TEST_CASE("[config] a NUL in a path is refused where it is, not cut short to another file") {
    CHECK(config_error("plugin_paths = [\"/opt/a\", \"/opt/p\\u0000junk\"]") ==
          "/etc/FILE.toml:1:27: 'plugin_paths[1]' = \"/opt/p\\u0000junk\" contains a NUL character (\\u0000), which "
          "no file path can hold");
    CHECK(config_error("\n  trace = \"/tmp/t.json\\u0000junk\"") ==
          "/etc/FILE.toml:2:11: 'trace' = \"/tmp/t.json\\u0000junk\" contains a NUL character (\\u0000), which no "
          "file path can hold");
  }

  TEST_CASE("[config] a table defined twice is named as written") {
    CHECK(config_error("[backend.\"cpu\"]\ndevices = 2\n[backend.\"cpu\"]\n")
              .ends_with("cannot redefine existing table [backend.\"cpu\"]"));
    CHECK(config_error("[backend.cpu]\n[backend.cpu]\n").ends_with("cannot redefine existing table [backend.cpu]"));
  }

  TEST_CASE("[config] invalid names and selectors are errors") {
    CHECK(config_error("backends = [\"CPU\"]") ==
          "/etc/FILE.toml:1:13: 'backends' has an invalid backend name 'CPU' at index 0; backend names use only a-z, "
          "0-9 and _");
    CHECK(config_error("backends = [\"cpu\", \"cpu\"]") ==
          "/etc/FILE.toml:1:20: 'backends' lists 'cpu' more than once");
    CHECK(config_error("backends = []") ==
          "/etc/FILE.toml:1:12: 'backends' is empty; list at least one backend or "
          "remove the key");
    CHECK(config_error("[backend.my-gpu]\nenabled = true")
              .find("'backend.my-gpu': invalid backend name 'my-gpu'; backend names use only a-z, 0-9 and _") !=
          std::string::npos);
    CHECK(config_error("default_device = \"cuda:x\"") ==
          "/etc/FILE.toml:1:18: 'default_device' is not a valid device selector: invalid device selector 'cuda:x': "
          "ordinal 'x' is not a non-negative decimal number (expected BACKEND or BACKEND:ORDINAL, e.g. 'cpu' or "
          "'cuda:1')");
    CHECK(config_error("plugin_paths = [\"\"]") == "/etc/FILE.toml:1:17: 'plugin_paths' has an empty path at index 0");
  }

  TEST_CASE("[config] trace names the trace file; anything but a non-empty string is an error") {
    CHECK(parse_config("trace = \"run/out.json\"\n", "/etc/FILE.toml").trace == std::filesystem::path("run/out.json"));
    CHECK(config_error("trace = 1") == "/etc/FILE.toml:1:9: 'trace' must be a string (a file path), got integer");
    CHECK(config_error("trace = \"\"") ==
          "/etc/FILE.toml:1:9: 'trace' is empty; expected the path of the trace file to write");
  }

  TEST_CASE("[config] unknown top-level key gives a warning naming key and file") {
    const Config config = parse_config("plugin_path = [\"/opt\"]\n\ncolour = \"red\"\n", "/etc/FILE.toml");
    REQUIRE(config.warnings.size() == 2);
    CHECK(config.warnings[0] ==
          "/etc/FILE.toml:3:10: unknown top-level key 'colour' ignored (known keys: plugin_paths, backends, "
          "default_device, probe_isolation, trace, [backend.NAME], [pjrt.NAME])");
    CHECK(config.warnings[1] ==
          "/etc/FILE.toml:1:15: unknown top-level key 'plugin_path' ignored (did you mean 'plugin_paths'?)");
    CHECK(config.plugin_paths.empty());
  }

  TEST_CASE("[config] unknown keys inside [backend.NAME] are plugin options") {
    const Config config = parse_config("[backend.vendor_x]\nmystery = 7\nenabled = true\n", "/etc/FILE.toml");
    CHECK(config.warnings.empty());
    CHECK(config.backend.at("vendor_x").enabled == true);
    CHECK(config.backend.at("vendor_x").options == Options{{"mystery", "7"}});
  }

  TEST_CASE("[config] files over 1 MiB are refused") {
    const std::string big(backplane::detail::kMaxConfigFileBytes + 1, '#');
    CHECK(config_error(big) == "config file /etc/FILE.toml is larger than the limit of 1048576 bytes");

    TempDir dir;
    const fs::path file = dir.write("big.toml", big);
    const Error error = load_error(Environment::fixed({{"BACKPLANE_CONFIG", file.string()}}), dir.path());
    CHECK(error.code() == ErrorCode::kConfig);
    CHECK(std::string(error.what()) ==
          "config file BACKPLANE_CONFIG=" + file.string() + " is larger than the limit of 1048576 bytes");
  }

  TEST_CASE("[config] input hitting the toml++ whitespace bug (EF B3 BF in a string) parses safely and exactly") {
    // U+FCFF, encoded EF B3 BF, makes toml++ 3.3.0 reach __builtin_unreachable.
    const Config config = parse_config(
        "[backend.cpu]\nlabel = \"a\xEF\xB3\xBF\x62\"  # caf\xC3\xA9\n"
        "s = \"\"\"\\\n\xC2\xA7\"\"\"\n",
        "/etc/FILE.toml");
    CHECK(config.backend.at("cpu").options == Options{{"label", "a\xEF\xB3\xBF\x62"}, {"s", "\xC2\xA7"}});
    // The minimal fuzzer input that showed the bug: a clear error, no crash.
    CHECK(config_error("\xCC\xAA") ==
          "/etc/FILE.toml:1:1: unexpected character U+032A; outside strings and comments TOML allows only ASCII");
    CHECK(config_error("[backend.cpu]\nlabel = 'x'\xEF\xB3\xBF") ==
          "/etc/FILE.toml:2:12: unexpected character U+FCFF; outside strings and comments TOML allows only ASCII");
    // Literal strings keep their bytes (a path like '/home/jürgen').
    const Config literal = parse_config("plugin_paths = ['/home/j\xC3\xBCrgen/\xEF\xB3\xBF']", "/etc/FILE.toml");
    CHECK(literal.plugin_paths == std::vector<fs::path>{"/home/j\xC3\xBCrgen/\xEF\xB3\xBF"});
  }

  TEST_CASE("[config] non-ASCII outside the affected ranges passes straight through") {
    const Config config = parse_config("[backend.cpu]\nlabel = '\xE4\xB8\xAD \xF0\x9F\x98\x80'\n", "/etc/FILE.toml");
    CHECK(config.backend.at("cpu").options == Options{{"label", "\xE4\xB8\xAD \xF0\x9F\x98\x80"}});
  }

  TEST_CASE("[config] invalid UTF-8 is an error with its position") {
    CHECK(config_error("# ok\nk = \"\xC3\x28\"") ==
          "/etc/FILE.toml:2:6: invalid UTF-8 (byte 0xC3); config files must be UTF-8 text");
  }

  TEST_CASE("[config] search: BACKPLANE_CONFIG wins") {
    TempDir dir;
    const fs::path chosen = dir.write("chosen.toml", "default_device = \"cpu:0\"");
    dir.write("xdg/backplane/config.toml", "default_device = \"cpu:1\"");
    dir.write("home/.config/backplane/config.toml", "default_device = \"cpu:2\"");
    dir.write("etc/backplane/config.toml", "default_device = \"cpu:3\"");
    const Config config = load_config(Environment::fixed({{"BACKPLANE_CONFIG", chosen.string()},
                                                          {"XDG_CONFIG_HOME", (dir.path() / "xdg").string()},
                                                          {"HOME", (dir.path() / "home").string()}}),
                                      dir.path() / "etc");
    CHECK(config.path == chosen);
    CHECK(config.searched == std::vector<fs::path>{chosen});
    CHECK(config.default_device == "cpu:0");
  }

  TEST_CASE("[config] search: XDG_CONFIG_HOME before HOME and sysconfdir") {
    TempDir dir;
    const fs::path xdg = dir.write("xdg/backplane/config.toml", "default_device = \"cpu:1\"");
    dir.write("home/.config/backplane/config.toml", "default_device = \"cpu:2\"");
    dir.write("etc/backplane/config.toml", "default_device = \"cpu:3\"");
    const Config config = load_config(Environment::fixed({{"XDG_CONFIG_HOME", (dir.path() / "xdg").string()},
                                                          {"HOME", (dir.path() / "home").string()}}),
                                      dir.path() / "etc");
    CHECK(config.path == xdg);
    CHECK(config.searched == std::vector<fs::path>{xdg});
    CHECK(config.default_device == "cpu:1");
  }

  TEST_CASE("[config] search: HOME/.config when XDG_CONFIG_HOME is unset, empty or relative") {
    TempDir dir;
    const fs::path home_file = dir.write("home/.config/backplane/config.toml", "default_device = \"cpu:2\"");
    dir.write("etc/backplane/config.toml", "default_device = \"cpu:3\"");
    const std::string home = (dir.path() / "home").string();
    for (const Environment& environment :
         {Environment::fixed({{"HOME", home}}), Environment::fixed({{"HOME", home}, {"XDG_CONFIG_HOME", ""}}),
          Environment::fixed({{"HOME", home}, {"XDG_CONFIG_HOME", "relative/dir"}}),
          Environment::fixed({{"HOME", home}, {"BACKPLANE_CONFIG", ""}})}) {
      const Config config = load_config(environment, dir.path() / "etc");
      CHECK(config.path == home_file);
      CHECK(config.default_device == "cpu:2");
    }
  }

  TEST_CASE("[config] search: sysconfdir last") {
    TempDir dir;
    const fs::path etc_file = dir.write("etc/backplane/config.toml", "default_device = \"cpu:3\"");
    const Config config =
        load_config(Environment::fixed({{"HOME", (dir.path() / "home").string()}}), dir.path() / "etc");
    CHECK(config.path == etc_file);
    CHECK(config.searched == std::vector<fs::path>{dir.path() / "home/.config/backplane/config.toml", etc_file});
    CHECK(config.default_device == "cpu:3");
  }

  TEST_CASE("[config] search: none found lists the searched paths") {
    TempDir dir;
    const Config config = load_config(Environment::fixed({{"XDG_CONFIG_HOME", (dir.path() / "xdg").string()},
                                                          {"HOME", (dir.path() / "home").string()}}),
                                      dir.path() / "etc");
    CHECK_FALSE(config.path.has_value());
    CHECK(config.searched ==
          std::vector<fs::path>{dir.path() / "xdg/backplane/config.toml", dir.path() / "etc/backplane/config.toml"});
    CHECK(config.warnings.empty());
    CHECK(config.backend.empty());

    // Neither HOME nor XDG_CONFIG_HOME: only sysconfdir is searched.
    const Config bare = load_config(Environment::fixed({}), dir.path() / "etc");
    CHECK(bare.searched == std::vector<fs::path>{dir.path() / "etc/backplane/config.toml"});
  }

  TEST_CASE("[config] search: BACKPLANE_CONFIG naming a missing file is an error") {
    TempDir dir;
    dir.write("etc/backplane/config.toml", "");  // would be found by the default search
    const fs::path missing = dir.path() / "nope.toml";
    const Error error = load_error(Environment::fixed({{"BACKPLANE_CONFIG", missing.string()}}), dir.path() / "etc");
    CHECK(error.code() == ErrorCode::kNotFound);
    CHECK(std::string(error.what()) == "config file BACKPLANE_CONFIG=" + missing.string() +
                                           " does not exist (unset BACKPLANE_CONFIG or make it empty to use the "
                                           "default search)");
  }

  TEST_CASE("[config] search: a config path that is a directory or unreadable is an error, not skipped") {
    TempDir dir;
    fs::create_directories(dir.path() / "etc/backplane/config.toml");
    Error error = load_error(Environment::fixed({}), dir.path() / "etc");
    CHECK(error.code() == ErrorCode::kConfig);
    CHECK(std::string(error.what()) ==
          "config file " + (dir.path() / "etc/backplane/config.toml").string() + " is a directory, not a file");

    error = load_error(Environment::fixed({{"BACKPLANE_CONFIG", dir.path().string()}}), dir.path() / "etc");
    CHECK(std::string(error.what()).find("BACKPLANE_CONFIG=" + dir.path().string() + " is a directory") !=
          std::string::npos);

    if (geteuid() != 0) {  // root reads anything
      const fs::path locked = dir.write("locked.toml", "");
      fs::permissions(locked, fs::perms::none);
      error = load_error(Environment::fixed({{"BACKPLANE_CONFIG", locked.string()}}), dir.path() / "etc");
      CHECK(error.code() == ErrorCode::kConfig);
      CHECK(std::string(error.what())
                .find("cannot read config file BACKPLANE_CONFIG=" + locked.string() + ": Permission denied") !=
            std::string::npos);
    }
  }

  TEST_CASE("[config] relative plugin_paths resolve against the config file's directory") {
    TempDir dir;
    const fs::path file = dir.write("conf/config.toml", "plugin_paths = [\"plugins\", \"./a/../b\", \"/abs\"]");
    const Config config = load_config(Environment::fixed({{"BACKPLANE_CONFIG", file.string()}}), dir.path());
    CHECK(config.plugin_paths ==
          std::vector<fs::path>{dir.path() / "conf/plugins", dir.path() / "conf/b", fs::path("/abs")});
  }

  TEST_CASE("[config] errors from a found file name that file") {
    TempDir dir;
    const fs::path file = dir.write("xdg/backplane/config.toml", "\nbackends = 3\n");
    const Error error =
        load_error(Environment::fixed({{"XDG_CONFIG_HOME", (dir.path() / "xdg").string()}}), dir.path());
    CHECK(error.code() == ErrorCode::kConfig);
    CHECK(std::string(error.what()) == file.string() + ":2:12: 'backends' must be an array of strings, got integer");
  }

  TEST_CASE("[config] a key or table header nested 100000 levels deep is an error, not a stack overflow") {
    std::string dotted = "x";
    for (int level = 0; level < 100000; ++level) dotted += ".x";
    for (const std::string& text : {dotted + " = 1\n", "\n[" + dotted + "]\n", "[[" + dotted + "]]\n"}) {
      const std::string error = config_error(text);
      CHECK(error.find("/etc/FILE.toml:") == 0);
      CHECK(error.find(": tables nested more than 128 levels deep") != std::string::npos);
    }
  }
}
