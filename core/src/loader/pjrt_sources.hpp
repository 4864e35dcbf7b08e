// Where PJRT plugin libraries come from, and what each becomes: the backend
// pjrt_<name> of the pjrt adapter plugin (docs/configuration.md, "PJRT
// plugins"). Reads files and the environment only; nothing here loads a
// library.
//
// The sources, in order: code (Runtime::Options::sources), the config
// file's [pjrt.NAME] tables, PJRT_NAMES_AND_LIBRARY_PATHS, installed Python
// packages (loader/package_scan.hpp).
#pragma once

#include "config/config.hpp"
#include "loader/plugin_library.hpp"
#include "util/environment.hpp"

#include <backplane/backplane.hpp>

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace backplane::detail {

// The adapter plugin's table name, and so its file backplane-pjrt.so.
inline constexpr std::string_view kPjrtAdapterName = "pjrt";

// One PJRT library, as discovery lists it.
struct PjrtSource {
  std::string name;     // as the source gave it
  std::string backend;  // pjrt_<name normalized>
  std::filesystem::path library;
  SearchOrigin origin = SearchOrigin::kCode;
  std::string origin_detail;
  // Non-empty: listed `failed` with it, nothing loaded.
  std::string problem;
  PluginOptions create_options;  // key, "<type>:<value>"
};

// "pjrt_" + `name` lowercased with every character outside [a-z0-9_] made
// '_': "XLA-CPU" -> "pjrt_xla_cpu".
std::string pjrt_backend_name(std::string_view name);

// Why `typed_value` ("int64:2", "bool:true", "float:0.5", "string:x",
// "int64_list:1,2") is not a PJRT create option value, naming `key`; nullopt
// when it is.
std::optional<std::string> create_option_problem(std::string_view key, std::string_view typed_value);

// The adapter's backend_create options for `source`, in order:
// library=<absolute path>, then create.<key>=<type>:<value> for each option.
PluginOptions adapter_options(const PjrtSource& source);

// A source with its backend name set and its name, library and options
// checked: a problem found here becomes source.problem.
PjrtSource checked_source(PjrtSource source);

// PJRT_NAMES_AND_LIBRARY_PATHS (JAX's variable): comma-separated
// `name:path` pairs. A malformed entry (no ':', an empty name or path) is a
// warning naming it; the good entries still count.
struct EnvironmentPjrt {
  std::vector<PjrtSource> sources;
  std::vector<std::string> warnings;
};
EnvironmentPjrt parse_pjrt_names_and_library_paths(std::string_view value);

// Every PJRT library of code, the config file, the environment (unless
// `read_environment` is false) and `from_packages`, in that order and
// checked; `warnings` gets the environment's. `searched` says where they
// were looked for, for the adapter's reason when there are none.
struct PjrtSources {
  std::vector<PjrtSource> sources;
  std::vector<std::string> warnings;
  std::string searched;
};
PjrtSources collect_pjrt_sources(const std::vector<PluginSource>& from_code, const Config& config,
                                 const Environment& environment, bool read_environment,
                                 std::vector<PjrtSource> from_packages,
                                 const std::vector<std::filesystem::path>& python_paths);

}  // namespace backplane::detail
