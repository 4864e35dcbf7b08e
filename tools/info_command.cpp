// `backplane info [--json]`: what was found, with what status and why.
// The JSON shape is documented in docs/cli.md and only grows.
#include "commands.hpp"
#include "python_paths.hpp"

#include <backplane/plugin.h>
#include <backplane/backplane.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <utility>

namespace backplane::tools {
namespace {

using json = nlohmann::ordered_json;

std::vector<std::string> capability_names(std::uint64_t capabilities) {
  std::vector<std::string> names;
  if (capabilities & BP_CAPABILITY_HOST_ADDRESSABLE) names.emplace_back("host_addressable");
  if (capabilities & BP_CAPABILITY_PINNED_HOST) names.emplace_back("pinned_host");
  if (capabilities & BP_CAPABILITY_ASYNC) names.emplace_back("async");
  if (capabilities & BP_CAPABILITY_CONVERT_INTEGERS) names.emplace_back("convert_integers");
  if (capabilities & BP_CAPABILITY_WRAP_MEMORY) names.emplace_back("wrap_memory");
  if (capabilities & BP_CAPABILITY_EVENT_TIMING) names.emplace_back("event_timing");
  if (capabilities & BP_CAPABILITY_PROBE_IN_CHILD) names.emplace_back("probe_in_child");
  if (capabilities & BP_CAPABILITY_NO_DEVICE_TO_DEVICE) names.emplace_back("no_device_to_device");
  return names;
}

json device_json(const DeviceInfo& device) {
  json attributes = json::object();
  for (const auto& [key, value] : device.attributes) attributes[key] = value;
  // null: the backend cannot tell how much is free.
  const json memory_free = device.memory_free ? json(*device.memory_free) : json(nullptr);
  return {{"selector", device.selector()},  {"name", device.name},
          {"kind", to_string(device.kind)}, {"memory_total", device.memory_total},
          {"memory_free", memory_free},     {"memory_kinds", device.memory_kinds},
          {"attributes", attributes}};
}

// Devices of an available backend; a plugin failing here is reported, not fatal.
struct DeviceListing {
  std::vector<DeviceInfo> devices;
  std::string error;
};

DeviceListing list_devices(const Runtime& runtime, const BackendInfo& backend) {
  DeviceListing listing;
  if (backend.status != BackendStatus::kAvailable) return listing;
  try {
    listing.devices = runtime.devices(backend.name);
  } catch (const Error& error) {
    listing.error = error.what();
  }
  return listing;
}

// The default device, or why there is none (a named device that cannot be
// used is reported, not fatal: info must still show the backends).
struct DefaultListing {
  std::optional<DefaultDevice> device;
  std::string error;
};

DefaultListing find_default(const Runtime& runtime) {
  DefaultListing listing;
  try {
    listing.device = runtime.default_device();
  } catch (const Error& error) {
    listing.error = error.what();
  }
  return listing;
}

json python_json(const PythonPaths& python) {
  json paths = json::array();
  for (const auto& path : python.paths) paths.push_back(path.string());
  return {{"interpreter", python.interpreter.empty() ? json(nullptr) : json(python.interpreter)},
          {"paths", paths},
          {"note", python.note}};
}

json config_json(const ConfigSummary& config) {
  json searched = json::array();
  for (const auto& path : config.searched) searched.push_back(path.string());
  return {{"path", config.path ? json(config.path->string()) : json(nullptr)},
          {"searched", searched},
          {"warnings", config.warnings}};
}

int print_json(const Runtime& runtime, const PythonPaths& python) {
  json search_path = json::array();
  for (const auto& entry : runtime.search_path()) {
    search_path.push_back(
        {{"path", entry.path.string()}, {"origin", to_string(entry.origin)}, {"origin_detail", entry.origin_detail}});
  }
  json backends = json::array();
  for (const auto& backend : runtime.backends()) {
    json item = {{"name", backend.name},
                 {"status", to_string(backend.status)},
                 {"reason", backend.reason},
                 {"plugin", backend.plugin_path.string()},
                 {"origin", to_string(backend.origin)},
                 {"origin_detail", backend.origin_detail},
                 {"library", backend.library.string()},
                 {"abi_version", backend.abi_version},
                 {"plugin_version", backend.plugin_version},
                 {"priority", backend.priority},
                 {"capabilities", capability_names(backend.capabilities)},
                 {"dlpack_device_type", backend.dlpack_device_type}};
    auto listing = list_devices(runtime, backend);
    json devices = json::array();
    for (const auto& device : listing.devices) devices.push_back(device_json(device));
    item["devices"] = devices;
    if (!listing.error.empty()) item["device_error"] = listing.error;
    backends.push_back(item);
  }
  json default_device = nullptr;
  auto chosen = find_default(runtime);
  if (chosen.device) {
    default_device = {{"selector", chosen.device->device.selector()},
                      {"source", to_string(chosen.device->source)},
                      {"description", chosen.device->description},
                      {"note", chosen.device->fallback_note}};
  } else {
    default_device = {{"error", chosen.error}};
  }
  json document = {{"version", version()},
                   {"abi_version", fmt::format("{}.{}", BP_ABI_MAJOR, BP_ABI_MINOR)},
                   {"config", config_json(runtime.config())},
                   {"python", python_json(python)},
                   {"search_path", search_path},
                   {"backends", backends},
                   {"default_device", default_device}};
  // Paths, plugin names, reasons and versions come from outside and need not
  // be UTF-8: replaced (U+FFFD), so one junk byte cannot cost the whole listing.
  fmt::print("{}\n", document.dump(2, ' ', false, json::error_handler_t::replace));
  return 0;
}

// Every string here but the fixed words comes from outside: config and
// plugin files, wheels' METADATA and entry points, plugins' and PJRT
// libraries' answers, the environment. Each goes through printable(), so a
// terminal escape, a newline or a byte that is not UTF-8 shows as \xNN and
// never acts on the terminal or forges a line of the listing.
int print_text(const Runtime& runtime, const PythonPaths& python) {
  fmt::print("backplane {} (plugin ABI {}.{})\n\n", version(), BP_ABI_MAJOR, BP_ABI_MINOR);
  ConfigSummary config = runtime.config();
  if (config.path) {
    fmt::print("config file: {}\n", printable(config.path->string()));
  } else {
    std::vector<std::string> searched;
    for (const auto& path : config.searched) searched.push_back(printable(path.string()));
    fmt::print("config file: none found (looked at {})\n", searched.empty()
                                                               ? std::string("nothing: environment ignored")
                                                               : fmt::format("{}", fmt::join(searched, ", ")));
  }
  for (const auto& warning : config.warnings) fmt::print("  warning: {}\n", printable(warning));
  fmt::print("python packages: {}\n", printable(python.note));
  fmt::print("\nplugin search path:\n");
  int index = 1;
  for (const auto& entry : runtime.search_path()) {
    fmt::print("  {}. {} ({})\n", index++, printable(entry.path.string()),
               entry.origin_detail.empty() ? std::string(to_string(entry.origin)) : printable(entry.origin_detail));
  }
  const auto& backends = runtime.backends();
  fmt::print("\nbackends:{}\n", backends.empty() ? " none found" : "");
  std::size_t name_width = 8;
  for (const auto& backend : backends) name_width = std::max(name_width, printable(backend.name).size());
  for (const auto& backend : backends) {
    fmt::print("  {:<{}} {:<12} {}\n", printable(backend.name), name_width, to_string(backend.status),
               printable(backend.plugin_path.string()));
    if (!backend.reason.empty()) fmt::print("  {:<{}} {:<12} {}\n", "", name_width, "", printable(backend.reason));
    if (!backend.library.empty())
      fmt::print("  {:<{}} {:<12} library: {}\n", "", name_width, "", printable(backend.library.string()));
    if (!backend.origin_detail.empty()) {
      fmt::print("  {:<{}} {:<12} from: {}\n", "", name_width, "", printable(backend.origin_detail));
    }
    auto listing = list_devices(runtime, backend);
    for (const auto& device : listing.devices) {
      std::vector<std::string> memory_kinds;
      for (const auto& kind : device.memory_kinds) memory_kinds.push_back(printable(kind));
      fmt::print("    {:<10} {} ({}), {} free of {}; memories: {}\n", printable(device.selector()),
                 printable(device.name), to_string(device.kind),
                 device.memory_free ? format_bytes(*device.memory_free) : "unknown", format_bytes(device.memory_total),
                 fmt::join(memory_kinds, ", "));
    }
    if (!listing.error.empty()) fmt::print("    cannot list devices: {}\n", printable(listing.error));
  }
  auto chosen = find_default(runtime);
  if (chosen.device) {
    fmt::print("\ndefault device: {} ({})\n", printable(chosen.device->device.selector()),
               printable(chosen.device->description));
    if (!chosen.device->fallback_note.empty()) fmt::print("  {}\n", printable(chosen.device->fallback_note));
  } else {
    fmt::print("\ndefault device: none: {}\n", printable(chosen.error));
  }
  return 0;
}

}  // namespace

std::string format_bytes(std::uint64_t bytes) {
  constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024.0 && unit < 5) {
    value /= 1024.0;
    ++unit;
  }
  return unit == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.1f} {}", value, kUnits[unit]);
}

bool isolation_by_default() {
  const char* chosen = ::secure_getenv("BACKPLANE_PROBE_ISOLATION");
  return chosen == nullptr || *chosen == '\0' || std::string_view(chosen) == "process";
}

int run_info(const Arguments& args) {
  bool as_json = false;
  for (auto arg : args) {
    if (arg == "--json") {
      as_json = true;
    } else {
      fmt::print(stderr, "backplane info: unknown option '{}'\nusage: backplane info [--json]\n", arg);
      return 2;
    }
  }
  Runtime::Options options;
  if (isolation_by_default()) options.probe_isolation = ProbeIsolation::kProcess;
  // The packages Python would see (PJRT wheels, backplane plugin wheels).
  static const PythonPaths python = ask_python_for_paths();
  options.python_paths = python.paths;
  // Never destroyed, like the process default: a plugin with live devices
  // must outlive static destructors (a static keeps it reachable for
  // LeakSanitizer).
  static Runtime* runtime_for_info = new Runtime(std::move(options));
  Runtime& runtime = *runtime_for_info;
  return as_json ? print_json(runtime, python) : print_text(runtime, python);
}

}  // namespace backplane::tools
