#include "loader/pjrt_sources.hpp"

#include "loader/plugin_limits.hpp"

#include <backplane/plugin_sdk/typed_value.hpp>

#include <fmt/format.h>

#include <variant>

namespace backplane::detail {
namespace {

constexpr std::string_view kBackendPrefix = "pjrt_";

std::string describe_code_source(const PluginSource& source) {
  return source.origin_detail.empty() ? std::string("Runtime::Options::sources") : source.origin_detail;
}

}  // namespace

std::string pjrt_backend_name(std::string_view name) {
  std::string backend(kBackendPrefix);
  for (const char c : name) {
    const char lower = (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
    const bool allowed = (lower >= 'a' && lower <= 'z') || (lower >= '0' && lower <= '9') || lower == '_';
    backend += allowed ? lower : '_';
  }
  return backend;
}

std::optional<std::string> create_option_problem(std::string_view key, std::string_view typed_value) {
  if (key.empty()) return std::string("a PJRT create option has an empty name");
  if (key.find('\0') != std::string_view::npos || typed_value.find('\0') != std::string_view::npos) {
    return fmt::format("PJRT create option '{}' contains a NUL character", key);
  }
  using Problem = plugin_sdk::TypedValueProblem;
  const auto parsed = plugin_sdk::parse_typed_value(typed_value);
  const auto* problem = std::get_if<Problem>(&parsed);
  if (problem == nullptr) return std::nullopt;
  switch (problem->kind) {
    case Problem::Kind::kNoType:
      return fmt::format("PJRT create option '{}' = '{}' has no type; write <type>:<value> with type {}", key,
                         typed_value, plugin_sdk::kTypedValueTypes);
    case Problem::Kind::kUnknownType:
      return fmt::format("PJRT create option '{}' = '{}': unknown type '{}'; expected {}", key, typed_value,
                         problem->type, plugin_sdk::kTypedValueTypes);
    case Problem::Kind::kBadValue: break;
  }
  const std::string_view type = problem->type;
  const std::string_view expected = type == "int64"   ? "a 64-bit integer"
                                    : type == "bool"  ? "true or false"
                                    : type == "float" ? "a 32-bit float"
                                                      : "a comma-separated list of 64-bit integers";
  return fmt::format("PJRT create option '{}' = '{}': {} is not {}", key, typed_value,
                     problem->value.empty() ? "''" : problem->value, expected);
}

PluginOptions adapter_options(const PjrtSource& source) {
  PluginOptions options;
  std::error_code error;
  std::filesystem::path library = std::filesystem::absolute(source.library, error);
  options.emplace_back("backend", pjrt_backend_name(source.name));
  options.emplace_back("library", (error ? source.library : library).lexically_normal().string());
  for (const auto& [key, value] : source.create_options) options.emplace_back("create." + key, value);
  return options;
}

PjrtSource checked_source(PjrtSource source) {
  source.backend = pjrt_backend_name(source.name);
  if (!source.problem.empty()) return source;
  if (source.name.empty()) {
    source.problem = fmt::format("the PJRT library {} has no name", source.library.string());
  } else if (source.backend.size() > kMaxBackendNameSize) {
    source.problem = fmt::format(
        "the backend name '{}' is longer than {} bytes; give the PJRT library {} a shorter "
        "name",
        source.backend, kMaxBackendNameSize, source.library.string());
  } else if (source.library.empty()) {
    source.problem = fmt::format("the PJRT library '{}' has no path", source.name);
  }
  for (const auto& [key, value] : source.create_options) {
    if (!source.problem.empty()) break;
    if (auto problem = create_option_problem(key, value)) source.problem = *problem;
  }
  return source;
}

EnvironmentPjrt parse_pjrt_names_and_library_paths(std::string_view value) {
  EnvironmentPjrt parsed;
  std::size_t start = 0;
  while (start <= value.size()) {
    std::size_t end = value.find(',', start);
    if (end == std::string_view::npos) end = value.size();
    const std::string_view entry = value.substr(start, end - start);
    start = end + 1;
    if (entry.empty()) continue;  // "a:/x,,b:/y" and a trailing comma, as JAX reads them
    const std::size_t colon = entry.find(':');
    if (colon == std::string_view::npos || colon == 0 || colon + 1 == entry.size()) {
      parsed.warnings.push_back(fmt::format(
          "PJRT_NAMES_AND_LIBRARY_PATHS: entry '{}' ignored: expected NAME:PATH (comma-separated entries)", entry));
      continue;
    }
    PjrtSource source;
    source.name = std::string(entry.substr(0, colon));
    source.library = std::string(entry.substr(colon + 1));
    source.origin = SearchOrigin::kEnvironment;
    source.origin_detail = "PJRT_NAMES_AND_LIBRARY_PATHS";
    parsed.sources.push_back(std::move(source));
  }
  return parsed;
}

PjrtSources collect_pjrt_sources(const std::vector<PluginSource>& from_code, const Config& config,
                                 const Environment& environment, bool read_environment,
                                 std::vector<PjrtSource> from_packages,
                                 const std::vector<std::filesystem::path>& python_paths) {
  PjrtSources collected;
  std::vector<std::string> searched;
  for (const PluginSource& given : from_code) {
    if (given.kind != PluginSource::Kind::kPjrtLibrary) continue;
    PjrtSource source;
    source.name = given.name;
    source.library = given.path;
    source.origin = given.origin;
    source.origin_detail = describe_code_source(given);
    source.problem = given.problem;
    source.create_options = given.create_options;
    collected.sources.push_back(checked_source(std::move(source)));
  }
  searched.emplace_back("Runtime::Options::sources");

  for (const PjrtLibraryConfig& table : config.pjrt) {
    PjrtSource source;
    source.name = table.name;
    source.library = table.library;
    source.origin = SearchOrigin::kConfig;
    source.origin_detail = fmt::format("config {} [pjrt.{}]", table.where, table.name);
    source.create_options = table.options;
    collected.sources.push_back(checked_source(std::move(source)));
  }
  searched.push_back(config.path ? fmt::format("[pjrt.NAME] tables in {}", config.path->string())
                                 : std::string("[pjrt.NAME] tables (no config file)"));

  const auto variable = read_environment ? environment.get("PJRT_NAMES_AND_LIBRARY_PATHS") : std::nullopt;
  if (variable && !variable->empty()) {
    EnvironmentPjrt parsed = parse_pjrt_names_and_library_paths(*variable);
    for (auto& source : parsed.sources) collected.sources.push_back(checked_source(std::move(source)));
    for (auto& warning : parsed.warnings) collected.warnings.push_back(std::move(warning));
    searched.emplace_back("PJRT_NAMES_AND_LIBRARY_PATHS");
  } else {
    searched.emplace_back(read_environment ? "PJRT_NAMES_AND_LIBRARY_PATHS (unset)"
                                           : "PJRT_NAMES_AND_LIBRARY_PATHS (environment ignored)");
  }

  for (auto& source : from_packages) collected.sources.push_back(checked_source(std::move(source)));
  if (python_paths.empty()) {
    searched.emplace_back("Python packages (no site directories given)");
  } else {
    std::vector<std::string> directories;
    for (const auto& path : python_paths) directories.push_back(path.string());
    searched.push_back(fmt::format("the jax_plugins and xla_plugins packages of {}", fmt::join(directories, ", ")));
  }
  collected.searched = fmt::format("{}", fmt::join(searched, ", "));
  return collected;
}

}  // namespace backplane::detail
