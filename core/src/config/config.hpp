// The configuration file: where it is found and what it may say.
//
// docs/configuration.md is the user-facing description of every key; this
// header is the contract for the code that consumes it (the Runtime).
//
// Error model: a config file the user has but that cannot be used (missing
// $BACKPLANE_CONFIG target, unreadable, too large, not UTF-8, TOML syntax, a
// key of the wrong type) throws backplane::Error. Nothing here falls back to
// defaults silently. Problems that do not stop the file from being used
// (unknown top-level keys) are returned in Config::warnings; the caller shows
// them (log and `backplane info`) — this layer does not log them itself.
#pragma once

#include <cstddef>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "util/environment.hpp"

#include <backplane/backplane.hpp>

namespace backplane::detail {

// Files larger than this are refused before parsing (keeps memory bounded).
inline constexpr std::size_t kMaxConfigFileBytes = 1024 * 1024;

// One [backend.NAME] table.
struct BackendConfig {
  std::optional<bool> enabled;  // `enabled`, when present
  std::optional<int> priority;  // `priority`, when present
  // Every other key, in file order, with its value as text: strings as they
  // are, integers in decimal, floats in shortest round-trip form ("0.5",
  // "inf", "nan"), booleans as "true"/"false". Handed to the plugin verbatim.
  std::vector<std::pair<std::string, std::string>> options;
};

// One [pjrt.NAME] table: a PJRT plugin library and its create options.
struct PjrtLibraryConfig {
  std::string name;               // NAME as written
  std::filesystem::path library;  // `library`; a relative one made relative to the file's directory
  // `options`, in file order: the key and "<type>:<value>", type int64,
  // bool, float, string or int64_list (integers comma-separated).
  std::vector<std::pair<std::string, std::string>> options;
  std::string where;  // "FILE:LINE:COLUMN" of the table, for messages and origins
};

struct Config {
  std::optional<std::filesystem::path> path;    // the file used; empty when none was found
  std::vector<std::filesystem::path> searched;  // candidates considered, in search order
  std::vector<std::filesystem::path>
      plugin_paths;  // `plugin_paths`, relative ones made relative to the file's directory
  std::optional<std::vector<std::string>> backends;  // `backends`: restricts the set and fixes the order
  std::optional<std::string> default_device;         // `default_device`, already checked by parse_selector
  std::optional<ProbeIsolation> probe_isolation;     // `probe_isolation`
  std::map<std::string, BackendConfig> backend;      // [backend.NAME], by NAME
  std::optional<std::filesystem::path> trace;        // `trace`: the trace file to record to (as written)
  std::vector<PjrtLibraryConfig> pjrt;               // [pjrt.NAME] tables, in file order
  std::vector<std::string> warnings;                 // usable-but-suspicious content, one sentence each
};

// "process" or "none" (BACKPLANE_PROBE_ISOLATION, `probe_isolation`); nullopt otherwise.
std::optional<ProbeIsolation> parse_probe_isolation(std::string_view text);

// Parses the text of a config file. `source` names the file in messages and
// anchors relative plugin_paths; it is not opened. Sets `path` to `source`.
// Throws Error(kConfig), the message starting "FILE:LINE:COLUMN: " where a
// position is known, for: text over kMaxConfigFileBytes, invalid UTF-8, TOML
// syntax errors (with toml++'s description), code points in a context the
// toml++ guard cannot make safe (see config.cpp), keys of the wrong type
// (naming the key, the expected and the actual type), invalid backend names,
// an invalid default_device selector, option values that are arrays,
// tables or dates, and in [pjrt.NAME]: a missing or empty `library`, an
// unknown key, an option of a type PJRT has no value for. Thread-safe.
Config parse_config(std::string_view text, const std::filesystem::path& source);

// Finds and parses the config file. First found wins:
//   1. $BACKPLANE_CONFIG (an empty value counts as unset) — when set, the file
//      must exist: a missing file throws Error(kNotFound) naming the variable
//      and the path, never a silent fallback;
//   2. $XDG_CONFIG_HOME/backplane/config.toml (only if XDG_CONFIG_HOME is an
//      absolute path, per the XDG spec), else $HOME/.config/backplane/config.toml;
//   3. <sysconf_dir>/backplane/config.toml.
// Nothing found: an empty Config whose `searched` lists the candidates. A
// candidate that exists but cannot be read (a directory, no permission, too
// large) throws Error(kConfig) rather than being skipped. All variables are
// read through `environment`, so elevated processes see none of them.
Config load_config(const Environment& environment, const std::filesystem::path& sysconf_dir);

}  // namespace backplane::detail
