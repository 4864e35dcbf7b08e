// The config file's top level and [backend.NAME] tables; [pjrt.NAME] is
// pjrt_config.cpp. Only the config readers include toml++ (it is heavy).
// Debian's package ships a compiled libtomlplusplus.so: toml_dep's
// pkg-config flags set TOML_HEADER_ONLY=0, and that library is what we link.
#include "config/config.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <system_error>

#include "backplane/error.hpp"
#include "config/pjrt_config.hpp"
#include "config/selector.hpp"
#include "config/toml_guard.hpp"
#include "config/toml_reader.hpp"
#include "util/log.hpp"
#include "util/trust.hpp"

namespace backplane::detail {
namespace fs = std::filesystem;

namespace {

constexpr std::array<std::string_view, 7> kTopLevelKeys = {
    "plugin_paths", "backends", "default_device", "probe_isolation", "backend", "trace", "pjrt"};

std::vector<std::string> string_array(const Reader& reader, const toml::node& node, std::string_view key) {
  const toml::array* array = node.as_array();
  if (array == nullptr) {
    reader.fail(node, fmt::format("'{}' must be an array of strings, got {}", key, type_name(node)));
  }
  std::vector<std::string> strings;
  for (std::size_t index = 0; index < array->size(); ++index) {
    const toml::node& element = *array->get(index);
    const auto* text = element.as_string();
    if (text == nullptr) {
      reader.fail(element,
                  fmt::format("'{}' must be an array of strings, got {} at index {}", key, type_name(element), index));
    }
    strings.push_back(text->get());
  }
  return strings;
}

std::vector<fs::path> read_plugin_paths(const Reader& reader, const toml::node& node, const fs::path& source) {
  std::vector<fs::path> paths;
  const auto strings = string_array(reader, node, "plugin_paths");
  for (std::size_t index = 0; index < strings.size(); ++index) {
    if (strings[index].empty()) {
      reader.fail(*node.as_array()->get(index), fmt::format("'plugin_paths' has an empty path at index {}", index));
    }
    reader.refuse_nul_in_path(*node.as_array()->get(index), fmt::format("plugin_paths[{}]", index), strings[index]);
    fs::path path(strings[index]);
    paths.push_back(path.is_absolute() ? path : (source.parent_path() / path).lexically_normal());
  }
  return paths;
}

std::vector<std::string> read_backends(const Reader& reader, const toml::node& node) {
  auto names = string_array(reader, node, "backends");
  if (names.empty()) reader.fail(node, "'backends' is empty; list at least one backend or remove the key");
  for (std::size_t index = 0; index < names.size(); ++index) {
    const toml::node& element = *node.as_array()->get(index);
    if (!is_valid_backend_name(names[index])) {
      reader.fail(element, fmt::format("'backends' has an invalid backend name '{}' at index {}; backend names use "
                                       "only a-z, 0-9 and _",
                                       names[index], index));
    }
    if (std::find(names.begin(), names.begin() + static_cast<std::ptrdiff_t>(index), names[index]) !=
        names.begin() + static_cast<std::ptrdiff_t>(index)) {
      reader.fail(element, fmt::format("'backends' lists '{}' more than once", names[index]));
    }
  }
  return names;
}

std::string read_default_device(const Reader& reader, const toml::node& node) {
  const auto* text = node.as_string();
  if (text == nullptr) reader.fail(node, fmt::format("'default_device' must be a string, got {}", type_name(node)));
  try {
    parse_selector(text->get());
  } catch (const Error& error) {
    reader.fail(node, fmt::format("'default_device' is not a valid device selector: {}", error.what()));
  }
  return text->get();
}

// toml++ garbles the name of a table defined twice when a key is quoted
// ('backend."cpcpu"' for [backend."cpu"]): name it by the header as written.
std::string describe_syntax_error(std::string_view description, std::string_view text, std::uint32_t line) {
  constexpr std::string_view kRedefined = "cannot redefine existing table";
  const std::size_t found = description.find(kRedefined);
  if (found == std::string_view::npos || line == 0) return std::string(description);
  std::size_t start = 0;
  for (std::uint32_t current = 1; current < line && start != std::string_view::npos; ++current) {
    start = text.find('\n', start);
    if (start != std::string_view::npos) ++start;
  }
  if (start == std::string_view::npos) return std::string(description);
  std::string_view header = text.substr(start, text.find('\n', start) - start);
  while (!header.empty() && (header.front() == ' ' || header.front() == '\t')) header.remove_prefix(1);
  const std::size_t close = header.rfind(']');
  if (header.empty() || header.front() != '[' || close == std::string_view::npos) return std::string(description);
  return fmt::format("{}{} {}", description.substr(0, found), kRedefined, header.substr(0, close + 1));
}

BackendConfig read_backend(const Reader& reader, const toml::node& node, const std::string& name) {
  const toml::table* table = node.as_table();
  if (table == nullptr) {
    reader.fail(node, fmt::format("'backend.{}' must be a table, got {}", name, type_name(node)));
  }
  BackendConfig backend;
  std::vector<std::pair<const toml::node*, std::pair<std::string, std::string>>> options;
  for (auto&& [key, value] : *table) {
    const std::string qualified = fmt::format("backend.{}.{}", name, key.str());
    if (key.str() == "enabled") {
      const auto* flag = value.as_boolean();
      if (flag == nullptr)
        reader.fail(value, fmt::format("'{}' must be a boolean, got {}", qualified, type_name(value)));
      backend.enabled = flag->get();
    } else if (key.str() == "priority") {
      const auto* number = value.as_integer();
      if (number == nullptr)
        reader.fail(value, fmt::format("'{}' must be an integer, got {}", qualified, type_name(value)));
      if (number->get() < std::numeric_limits<int>::min() || number->get() > std::numeric_limits<int>::max()) {
        reader.fail(value,
                    fmt::format("'{}' must be an integer from {} to {}, got {}", qualified,
                                std::numeric_limits<int>::min(), std::numeric_limits<int>::max(), number->get()));
      }
      backend.priority = static_cast<int>(number->get());
    } else {
      std::string text;
      if (const auto* string = value.as_string()) {
        text = string->get();
      } else if (const auto* integer = value.as_integer()) {
        text = fmt::format("{}", integer->get());
      } else if (const auto* floating = value.as_floating_point()) {
        text = float_text(floating->get());
      } else if (const auto* boolean = value.as_boolean()) {
        text = boolean->get() ? "true" : "false";
      } else {
        reader.fail(value, fmt::format("option '{}' must be a string, integer, float or boolean, got {}", qualified,
                                       type_name(value)));
      }
      // A NUL would cut the option short on its way through the C ABI.
      if (key.str().find('\0') != std::string_view::npos) {
        reader.fail(value, fmt::format("option name '{}' contains a NUL character (\\u0000)", printable(qualified)));
      }
      if (text.find('\0') != std::string::npos) {
        reader.fail(value, fmt::format("option '{}' = \"{}\" contains a NUL character (\\u0000)", printable(qualified),
                                       printable(text)));
      }
      options.push_back({&value, {std::string(key.str()), std::move(text)}});
    }
  }
  // toml++ iterates keys in sorted order; plugins get them in file order.
  std::stable_sort(options.begin(), options.end(), [](const auto& left, const auto& right) {
    const auto a = left.first->source().begin;
    const auto b = right.first->source().begin;
    return a.line != b.line ? a.line < b.line : a.column < b.column;
  });
  for (auto& option : options) backend.options.push_back(std::move(option.second));
  return backend;
}

// Levenshtein distance, for "did you mean" on unknown keys.
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> previous(b.size() + 1);
  std::vector<std::size_t> current(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) previous[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    current[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t substitution = previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      current[j] = std::min({previous[j] + 1, current[j - 1] + 1, substitution});
    }
    std::swap(previous, current);
  }
  return previous[b.size()];
}

std::string unknown_key_warning(const Reader& reader, const toml::node& node, std::string_view key) {
  std::string message = fmt::format("{}: unknown top-level key '{}' ignored", reader.where(node), key);
  std::string_view best;
  std::size_t best_distance = 3;  // suggest only close matches
  for (std::string_view known : kTopLevelKeys) {
    const std::size_t distance = edit_distance(key, known);
    if (distance < best_distance) {
      best = known;
      best_distance = distance;
    }
  }
  if (!best.empty()) {
    message += fmt::format(" (did you mean '{}'?)", best);
  } else {
    message +=
        " (known keys: plugin_paths, backends, default_device, probe_isolation, trace, [backend.NAME], [pjrt.NAME])";
  }
  return message;
}

// Reads a whole file of at most kMaxConfigFileBytes. `origin` says how the
// file was chosen, for messages ("BACKPLANE_CONFIG=/x/y" or just the path).
std::string read_file(const fs::path& path, const std::string& origin) {
  std::error_code error;
  const fs::file_status status = fs::status(path, error);
  if (error) throw Error(ErrorCode::kConfig, fmt::format("cannot check config file {}: {}", origin, error.message()));
  if (fs::is_directory(status)) {
    throw Error(ErrorCode::kConfig, fmt::format("config file {} is a directory, not a file", origin));
  }
  if (!fs::is_regular_file(status)) {
    throw Error(ErrorCode::kConfig, fmt::format("config file {} is not a regular file", origin));
  }
  std::ifstream stream(path, std::ios::binary);
  if (!stream) {
    throw Error(ErrorCode::kConfig, fmt::format("cannot read config file {}: {}", origin, std::strerror(errno)));
  }
  std::string text(kMaxConfigFileBytes + 1, '\0');
  stream.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (stream.bad()) {
    throw Error(ErrorCode::kConfig, fmt::format("cannot read config file {}: {}", origin, std::strerror(errno)));
  }
  text.resize(static_cast<std::size_t>(stream.gcount()));
  if (text.size() > kMaxConfigFileBytes) {
    throw Error(ErrorCode::kConfig,
                fmt::format("config file {} is larger than the limit of {} bytes", origin, kMaxConfigFileBytes));
  }
  return text;
}

Config load_file(const fs::path& path, const std::string& origin, std::vector<fs::path> searched) {
  // The file names plugin directories, whose code runs in this process: it
  // must be as safe from other users as a plugin (util/trust.hpp).
  if (auto problem = untrusted_path(path)) {
    throw Error(ErrorCode::kConfig, fmt::format("config file {}: {} (it names plugin directories, whose code runs "
                                                "in this process)",
                                                origin, *problem));
  }
  Config config = parse_config(read_file(path, origin), path);
  config.searched = std::move(searched);
  log(LogLevel::kDebug, "config: using {}", origin);
  return config;
}

}  // namespace

std::optional<ProbeIsolation> parse_probe_isolation(std::string_view text) {
  if (text == "process") return ProbeIsolation::kProcess;
  if (text == "none") return ProbeIsolation::kNone;
  return std::nullopt;
}

Config parse_config(std::string_view text, const fs::path& source) {
  if (text.size() > kMaxConfigFileBytes) {
    throw Error(ErrorCode::kConfig, fmt::format("config file {} is larger than the limit of {} bytes", source.string(),
                                                kMaxConfigFileBytes));
  }
  const GuardedToml guarded(text, source);
  toml::table document;
  try {
    document = toml::parse(guarded.text(), source.string());
  } catch (const toml::parse_error& error) {
    const toml::source_position begin = error.source().begin;
    throw Error(ErrorCode::kConfig, fmt::format("{}:{}:{}: TOML syntax error: {}", source.string(), begin.line,
                                                guarded.original_column(begin.line, begin.column),
                                                describe_syntax_error(error.description(), text, begin.line)));
  }

  const Reader reader(source, guarded);
  Config config;
  config.path = source;
  for (auto&& [key, value] : document) {
    const std::string_view name = key.str();
    if (name == "plugin_paths") {
      config.plugin_paths = read_plugin_paths(reader, value, source);
    } else if (name == "backends") {
      config.backends = read_backends(reader, value);
    } else if (name == "default_device") {
      config.default_device = read_default_device(reader, value);
    } else if (name == "probe_isolation") {
      const auto* text = value.as_string();
      if (text == nullptr)
        reader.fail(value, fmt::format("'probe_isolation' must be a string, got {}", type_name(value)));
      config.probe_isolation = parse_probe_isolation(text->get());
      if (!config.probe_isolation) {
        reader.fail(value, fmt::format("'probe_isolation' is '{}'; expected \"process\" or \"none\"", text->get()));
      }
    } else if (name == "trace") {
      const auto* text = value.as_string();
      if (text == nullptr)
        reader.fail(value, fmt::format("'trace' must be a string (a file path), got {}", type_name(value)));
      if (text->get().empty()) reader.fail(value, "'trace' is empty; expected the path of the trace file to write");
      reader.refuse_nul_in_path(value, "trace", text->get());
      config.trace = std::filesystem::path(text->get());
    } else if (name == "pjrt") {
      config.pjrt = read_pjrt_tables(reader, value);
    } else if (name == "backend") {
      const toml::table* backends = value.as_table();
      if (backends == nullptr) {
        reader.fail(value, fmt::format("'backend' must be a table of [backend.NAME] tables, got {}", type_name(value)));
      }
      for (auto&& [backend_key, backend_value] : *backends) {
        const std::string backend_name(backend_key.str());
        if (!is_valid_backend_name(backend_name)) {
          reader.fail(backend_value, fmt::format("'backend.{}': invalid backend name '{}'; backend names use only "
                                                 "a-z, 0-9 and _",
                                                 backend_name, backend_name));
        }
        config.backend.emplace(backend_name, read_backend(reader, backend_value, backend_name));
      }
    } else {
      config.warnings.push_back(unknown_key_warning(reader, value, name));
    }
  }
  return config;
}

Config load_config(const Environment& environment, const fs::path& sysconf_dir) {
  std::vector<fs::path> searched;

  const auto explicit_path = environment.get("BACKPLANE_CONFIG");
  if (explicit_path && !explicit_path->empty()) {
    const fs::path path(*explicit_path);
    searched.push_back(path);
    const std::string origin = fmt::format("BACKPLANE_CONFIG={}", path.string());
    std::error_code error;
    const fs::file_status status = fs::status(path, error);
    if (status.type() == fs::file_type::not_found) {
      throw Error(ErrorCode::kNotFound, fmt::format("config file {} does not exist (unset BACKPLANE_CONFIG or make it "
                                                    "empty to use the default search)",
                                                    origin));
    }
    return load_file(path, origin, std::move(searched));
  }

  const auto xdg_config_home = environment.get("XDG_CONFIG_HOME");
  const auto home = environment.get("HOME");
  if (xdg_config_home && fs::path(*xdg_config_home).is_absolute()) {
    searched.push_back(fs::path(*xdg_config_home) / "backplane" / "config.toml");
  } else if (home && fs::path(*home).is_absolute()) {
    searched.push_back(fs::path(*home) / ".config" / "backplane" / "config.toml");
  }
  searched.push_back(sysconf_dir / "backplane" / "config.toml");

  std::string listing;
  for (std::size_t index = 0; index < searched.size(); ++index) {
    const fs::path candidate = searched[index];
    std::error_code error;
    const fs::file_status status = fs::status(candidate, error);
    if (status.type() != fs::file_type::not_found) {
      // Exists (or cannot be checked): use it or fail loudly, never skip it.
      searched.resize(index + 1);
      return load_file(candidate, candidate.string(), std::move(searched));
    }
    listing += (index == 0 ? "" : ", ") + candidate.string();
  }
  log(LogLevel::kDebug, "config: no config file found; searched {}", listing);
  Config config;
  config.searched = std::move(searched);
  return config;
}

}  // namespace backplane::detail
