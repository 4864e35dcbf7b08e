// backplane conformance suite: checks one plugin file against the Backend ABI
// (core/include/backplane/plugin.h, rules in docs/plugin-abi.md).
//
// The suite loads the file the way the core's loader does (refusing a
// world-writable file or directory), then drives the raw table: negotiation,
// probe, device info, allocation patterns, copies in every direction with
// random data at odd sizes and offsets, asynchronous completion, optional
// capabilities, and the error paths every plugin must take instead of
// crashing. `backplane conformance PLUGIN.so` prints the result; tests call
// run() directly. docs/plugin-authors.md lists the checks.
//
// Error model: run() reports everything the plugin does as values (checks
// that fail); it throws only std::bad_alloc. A plugin that crashes takes the
// calling process with it, so CI runs the suite in one process per plugin
// (the `backplane conformance` command).
//
// Thread-safety: run() may be called from several threads, for different
// plugin files; on_check is called on the calling thread.
#ifndef BACKPLANE_CONFORMANCE_HPP
#define BACKPLANE_CONFORMANCE_HPP

#include <backplane/api.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace backplane::conformance {

enum class Outcome {
  kPass,
  kFail,
  kNotApplicable,  // the plugin does not advertise the feature, has no device, or is unavailable
};
// "pass", "FAIL", "n/a".
BACKPLANE_API std::string_view to_string(Outcome outcome) noexcept;

struct BACKPLANE_API CheckResult {
  std::string name;  // stable, "<area>: <what is checked>", e.g. "copies: device->device between devices"
  Outcome outcome = Outcome::kPass;
  std::string detail;  // why it failed or does not apply; on a pass, optional context
};

struct BACKPLANE_API Options {
  // Passed to backend_create, as the config file's [backend.NAME] keys would be.
  std::vector<std::pair<std::string, std::string>> plugin_options;
  // Seeds the random data; the same seed gives the same data and sizes.
  std::uint64_t seed = 0x5EED;
  // Called as each check finishes, before the next one starts (so a plugin
  // that crashes leaves the checks before it printed).
  std::function<void(const CheckResult&)> on_check;
  // Called with a check's name just before it runs (so a plugin that crashes
  // the process leaves the name of the check it crashed in).
  std::function<void(const std::string& name)> on_start;
  // First load, create and probe the plugin in a separate process (as
  // discovery with BACKPLANE_PROBE_ISOLATION=process does, within
  // BACKPLANE_PROBE_TIMEOUT_MS): a plugin that crashes, exits or hangs there
  // fails that check and is never loaded into this process.
  bool isolate = false;
};

struct BACKPLANE_API Report {
  std::filesystem::path plugin_file;
  bool loaded = false;         // the table was read and validated
  std::string backend_name;    // from the table; empty when not loaded
  std::string plugin_version;  // the plugin's own version string
  std::string abi_version;     // "1.1"
  bool created = false;        // backend_create gave a backend instance
  bool probed = false;         // probe answered (it did not return an error)
  bool available = false;      // what probe answered
  std::string probe_reason;
  int device_count = 0;
  std::vector<CheckResult> checks;  // in the order they ran

  std::size_t count(Outcome outcome) const noexcept;
  // True when no check failed (n/a checks do not fail a run).
  bool passed() const noexcept { return count(Outcome::kFail) == 0 && !checks.empty(); }
};

// Loads `plugin_file` and runs every check. A file named backplane-<name>.so
// must declare backend <name>; any other file name is accepted as it is.
BACKPLANE_API Report run(const std::filesystem::path& plugin_file, const Options& options = {});

}  // namespace backplane::conformance

#endif  // BACKPLANE_CONFORMANCE_HPP
