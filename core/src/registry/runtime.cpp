#include "registry/runtime_impl.hpp"

#include "config/selector.hpp"
#include "loader/package_scan.hpp"
#include "loader/pjrt_sources.hpp"
#include "loader/search_path.hpp"
#include "trace/trace.hpp"
#include "util/local_rank.hpp"
#include "util/log.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <mutex>

namespace backplane {
using detail::Backend;
using detail::Config;
using detail::DiscoveredBackend;
using detail::DiscoveryInputs;
using detail::Environment;
using detail::is_valid_backend_name;
using detail::LogLevel;
using detail::parse_probe_isolation;
namespace trace = detail::trace;

std::string_view version() noexcept { return BACKPLANE_VERSION; }

std::string_view to_string(BackendStatus status) noexcept {
  switch (status) {
    case BackendStatus::kAvailable: return "available";
    case BackendStatus::kUnavailable: return "unavailable";
    case BackendStatus::kIncompatible: return "incompatible";
    case BackendStatus::kFailed: return "failed";
    case BackendStatus::kDisabled: return "disabled";
    case BackendStatus::kShadowed: return "shadowed";
  }
  return "unknown";
}

std::string_view to_string(ProbeIsolation isolation) noexcept {
  switch (isolation) {
    case ProbeIsolation::kNone: return "none";
    case ProbeIsolation::kProcess: return "process";
  }
  return "unknown";
}

std::string_view to_string(DeviceKind kind) noexcept {
  switch (kind) {
    case DeviceKind::kCpu: return "cpu";
    case DeviceKind::kGpu: return "gpu";
    case DeviceKind::kAccelerator: return "accelerator";
  }
  return "unknown";
}

namespace {

// BACKPLANE_BACKENDS=sim,cpu -> {"sim", "cpu"}; strict, like selectors.
std::vector<std::string> parse_backend_list(const std::string& text) {
  std::vector<std::string> names;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    std::string name = text.substr(start, end - start);
    if (!is_valid_backend_name(name)) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("BACKPLANE_BACKENDS='{}': '{}' is not a backend name (expected a comma-separated "
                              "list such as cuda,cpu)",
                              text, name));
    }
    names.push_back(std::move(name));
    start = end + 1;
  }
  return names;
}

Config read_config(const Runtime::Options& options, const Environment& environment) {
  if (options.config_file) {
    std::error_code error;
    if (!std::filesystem::is_regular_file(*options.config_file, error)) {
      throw Error(ErrorCode::kNotFound,
                  fmt::format("config file {} given in code does not exist", options.config_file->string()));
    }
    Environment only_this = Environment::fixed({{"BACKPLANE_CONFIG", options.config_file->string()}});
    return load_config(only_this, BACKPLANE_SYSCONF_DIR);
  }
  if (options.ignore_environment) return Config{};
  return load_config(environment, BACKPLANE_SYSCONF_DIR);
}

// Code, then BACKPLANE_PROBE_ISOLATION, then the config file; else none. An
// invalid variable is a warning and leaves the choice to the config file.
ProbeIsolation probe_isolation(const Runtime::Options& options, const Environment& environment, const Config& config) {
  if (options.probe_isolation) return *options.probe_isolation;
  if (auto text = environment.get("BACKPLANE_PROBE_ISOLATION"); text && !text->empty()) {
    if (auto isolation = parse_probe_isolation(*text)) return *isolation;
    log(LogLevel::kWarn, "BACKPLANE_PROBE_ISOLATION='{}' is neither 'process' nor 'none'; ignored", *text);
  }
  return config.probe_isolation.value_or(ProbeIsolation::kNone);
}

// BACKPLANE_TRACE, else `trace` in the config file: starts recording before
// discovery, so the plugins' loading is on the timeline. A trace already being
// recorded (started by code or an earlier runtime) is left alone; a file that
// cannot be written is a warning, not a reason to refuse the runtime.
void start_trace_if_asked(const Environment& environment, const Config& config, const std::string& config_name) {
  std::optional<std::filesystem::path> path;
  std::string origin;
  if (auto text = environment.get("BACKPLANE_TRACE"); text && !text->empty()) {
    path = *text;
    origin = "BACKPLANE_TRACE=" + *text;
  } else if (config.trace) {
    path = config.trace;
    origin = fmt::format("'trace' in {}", config_name);
  }
  if (!path || trace::active_path()) return;
  try {
    trace::start(*path);
    log(LogLevel::kInfo, "recording a trace to {} ({})", trace::active_path().value_or(*path).string(), origin);
  } catch (const Error& error) {
    log(LogLevel::kWarn, "{}: no trace recorded: {}", origin, error.what());
    return;
  }
  // One name for every process of a job: each replaces the others' file.
  if (path->native().find('%') != std::string::npos) return;
  for (std::string_view variable : detail::kLocalRankVariables) {
    if (auto rank = environment.get(variable); rank && !rank->empty()) {
      log(LogLevel::kWarn,
          "{}: every process of this job ({}={}) writes the same file, so only the last one written is kept; put "
          "%r (the local rank) or %p (the process id) in the name (docs/tracing.md)",
          origin, variable, *rank);
      return;
    }
  }
}

}  // namespace

void detail::Registry::ensure_discovered() {
  std::call_once(discovered_once_, [this] {
    config = read_config(options, environment);
    for (const auto& warning : config.warnings) log(LogLevel::kWarn, "{}", warning);
    std::string config_name = config.path ? config.path->string() : std::string();
    start_trace_if_asked(environment, config, config_name);
    // An NVTX tool (Nsight Systems) sees the spans with no trace recorded.
    trace::attach_tools();

    DiscoveryPolicy policy;
    if (auto listed = environment.get("BACKPLANE_BACKENDS"); listed && !listed->empty()) {
      backend_order = parse_backend_list(*listed);
      backend_order_source = "BACKPLANE_BACKENDS=" + *listed;
    } else if (config.backends) {
      backend_order = config.backends;
      backend_order_source = fmt::format("'backends' in {}", config_name);
    }
    policy.allowed = backend_order;
    policy.probe_timeout = environment.get("BACKPLANE_PROBE_TIMEOUT_MS");
    policy.isolation = probe_isolation(options, environment, config);
    policy.allowed_source = backend_order_source;
    for (const auto& [name, backend] : config.backend) {
      if (backend.enabled == false) {
        policy.disabled.emplace(name, fmt::format("[backend.{}] enabled = false in {}", name, config_name));
      }
      if (backend.priority) policy.priorities.emplace(name, *backend.priority);
      if (!backend.options.empty()) {
        policy.options.emplace(name, backend.options);
        configured.emplace(name, fmt::format("[backend.{}] in {}", name, config_name));
      }
    }
    // Options given in code win over the config's keys of the same name.
    for (const auto& [name, code_options] : options.backend_options) {
      if (!code_options.empty()) configured.insert_or_assign(name, "Runtime::Options::backend_options");
      PluginOptions& merged = policy.options[name];
      for (const auto& option : code_options) {
        auto same_key = [&](const auto& pair) { return pair.first == option.first; };
        merged.erase(std::remove_if(merged.begin(), merged.end(), same_key), merged.end());
        merged.push_back(option);
      }
    }

    // Packages are read from their files: no Python code runs.
    detail::PackageScan packages = detail::scan_python_packages(options.python_paths);
    DiscoveryInputs inputs;
    detail::SearchPathInputs paths;
    for (const auto& path : options.plugin_paths) paths.from_code.push_back({path, SearchOrigin::kCode, ""});
    for (const PluginSource& source : options.sources) {
      if (source.kind != PluginSource::Kind::kPluginPath) continue;
      if (!source.problem.empty()) {
        inputs.broken_plugins.push_back(
            {source.name, source.path, source.origin, source.origin_detail, source.problem});
        continue;
      }
      SearchPathEntry entry{source.path, source.origin, source.origin_detail};
      (source.origin == SearchOrigin::kPackage ? paths.from_packages : paths.from_code).push_back(std::move(entry));
    }
    paths.from_config = config.plugin_paths;
    for (auto& entry : packages.plugin_directories) paths.from_packages.push_back(std::move(entry));
    paths.use_environment = !options.ignore_environment;
    paths.use_default_dirs = !options.skip_default_paths;
    search_path = build_search_path(paths, environment);
    inputs.search_path = search_path;
    for (auto& broken : packages.broken_plugins) inputs.broken_plugins.push_back(std::move(broken));

    detail::PjrtSources pjrt =
        detail::collect_pjrt_sources(options.sources, config, environment, !options.ignore_environment,
                                     std::move(packages.pjrt), options.python_paths);
    for (auto& warning : pjrt.warnings) {
      log(LogLevel::kWarn, "{}", warning);
      config.warnings.push_back(std::move(warning));
    }
    inputs.pjrt = std::move(pjrt.sources);
    inputs.pjrt_searched = std::move(pjrt.searched);

    discovered = discover(inputs, policy);
    for (const auto& backend : discovered) infos.push_back(backend.info);
  });
}

const DiscoveredBackend* detail::Registry::find(std::string_view name) const {
  for (const auto& backend : discovered) {
    if (backend.info.name == name && backend.info.status != BackendStatus::kShadowed) return &backend;
  }
  return nullptr;
}

std::string detail::Registry::describe_backends() const {
  std::vector<std::string> parts;
  for (const auto& backend : discovered) {
    const BackendInfo& info = backend.info;
    if (info.status == BackendStatus::kShadowed) continue;
    if (info.status == BackendStatus::kAvailable) {
      parts.push_back(fmt::format("{} (available)", info.name));
    } else {
      parts.push_back(fmt::format("{} ({}: {})", info.name, to_string(info.status), info.reason));
    }
  }
  return parts.empty() ? "none found" : fmt::format("{}", fmt::join(parts, ", "));
}

std::vector<std::string> detail::Registry::backend_names() const {
  std::vector<std::string> names;
  for (const auto& backend : discovered) names.push_back(backend.info.name);
  return names;
}

Backend& detail::Registry::live_backend(std::string_view name) {
  ensure_discovered();
  const DiscoveredBackend* entry = find(name);
  if (entry == nullptr) {
    const std::optional<std::string> suggestion = suggest_backend(name, backend_names());
    throw Error(ErrorCode::kNotFound,
                fmt::format("no backend '{}'{}; backends: {}", name,
                            suggestion ? fmt::format(" (did you mean '{}'?)", *suggestion) : std::string(),
                            describe_backends()));
  }
  if (!entry->live) {
    throw Error(ErrorCode::kUnavailable,
                fmt::format("backend '{}' is {}: {}", name, to_string(entry->info.status), entry->info.reason));
  }
  return *entry->live;
}

namespace {

// The process default's python_paths until it is made; made says it was.
struct ProcessDefaultSetup {
  std::mutex mutex;
  std::vector<std::filesystem::path> python_paths;
  bool made = false;
};
ProcessDefaultSetup& process_default_setup = *new ProcessDefaultSetup;  // never destroyed: used until exit

}  // namespace

Runtime& Runtime::process_default() {
  // Never destroyed: plugins with live devices must outlive static destructors.
  static Runtime* runtime = [] {
    const std::lock_guard lock(process_default_setup.mutex);
    Options options;
    options.python_paths = process_default_setup.python_paths;
    process_default_setup.made = true;
    return new Runtime(std::move(options));
  }();
  return *runtime;
}

void Runtime::set_process_default_python_paths(std::vector<std::filesystem::path> paths) {
  const std::lock_guard lock(process_default_setup.mutex);
  if (process_default_setup.made) {
    throw Error(ErrorCode::kInvalidArgument,
                "the process-wide runtime's Python paths cannot change: it was already made, so its discovery "
                "already ran (or may be running); set them before its first use");
  }
  process_default_setup.python_paths = std::move(paths);
}

std::shared_ptr<detail::LiveDevice> detail::Registry::device(const Device& device) {
  const std::lock_guard lock(devices_mutex_);
  const auto key = std::pair(device.backend, device.ordinal);
  if (const auto found = devices_.find(key); found != devices_.end()) return found->second;
  Backend& backend = live_backend(device.backend);  // throws naming the backends
  check_ordinal(device, backend.device_count());
  auto made = std::make_shared<LiveDevice>(device, find(device.backend)->live);
  devices_.emplace(key, made);
  return made;
}

Runtime::Runtime() : Runtime(Options{}) {}

Runtime::Runtime(Options options) : impl_(std::make_unique<Impl>(std::move(options), Environment::process())) {
  if (impl_->registry->options.ignore_environment) {
    impl_->registry->environment = Environment::fixed({});
  } else if (impl_->registry->options.environment) {
    impl_->registry->environment = Environment::fixed(*impl_->registry->options.environment);
  }
}

Runtime::~Runtime() = default;

std::vector<SearchPathEntry> Runtime::search_path() const {
  impl_->registry->ensure_discovered();
  return impl_->registry->search_path;
}

const std::vector<BackendInfo>& Runtime::backends() const {
  impl_->registry->ensure_discovered();
  return impl_->registry->infos;
}

const BackendInfo* Runtime::find_backend(std::string_view name) const {
  for (const auto& info : backends()) {
    if (info.name == name && info.status != BackendStatus::kShadowed) return &info;
  }
  return nullptr;
}

ConfigSummary Runtime::config() const {
  impl_->registry->ensure_discovered();
  return {impl_->registry->config.path, impl_->registry->config.searched, impl_->registry->config.warnings};
}

bool Runtime::is_available(std::string_view name) const {
  const BackendInfo* info = find_backend(name);
  return info != nullptr && info->status == BackendStatus::kAvailable;
}

std::vector<DeviceInfo> Runtime::devices(std::string_view backend_name) const {
  Backend& backend = impl_->registry->live_backend(backend_name);
  std::vector<DeviceInfo> devices;
  int count = backend.device_count();
  for (int ordinal = 0; ordinal < count; ++ordinal) devices.push_back(backend.device_info(ordinal));
  return devices;
}

std::vector<DeviceInfo> Runtime::devices() const {
  impl_->registry->ensure_discovered();
  std::vector<DeviceInfo> all;
  for (const DiscoveredBackend* entry : impl_->registry->preference_order()) {
    if (!entry->live) continue;
    auto devices = this->devices(entry->info.name);
    std::move(devices.begin(), devices.end(), std::back_inserter(all));
  }
  return all;
}

}  // namespace backplane
