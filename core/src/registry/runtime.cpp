#include "registry/runtime_impl.hpp"

#include "loader/search_path.hpp"
#include "util/log.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace backplane {

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

std::string_view to_string(SearchOrigin origin) noexcept {
  switch (origin) {
    case SearchOrigin::kCode: return "code";
    case SearchOrigin::kEnvironment: return "BACKPLANE_PLUGIN_PATH";
    case SearchOrigin::kConfig: return "config";
    case SearchOrigin::kInstallDir: return "install";
    case SearchOrigin::kCoreDir: return "next to core";
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

void Runtime::Impl::ensure_discovered() {
  std::call_once(discovered_once_, [this] {
    SearchPathInputs inputs;
    inputs.from_code = options.plugin_paths;
    inputs.use_environment = !options.ignore_environment;
    inputs.use_default_dirs = !options.skip_default_paths;
    search_path = build_search_path(inputs, environment);

    DiscoveryPolicy policy;
    for (const auto& [name, backend_options] : options.backend_options) {
      policy.options.emplace(name, backend_options);
    }
    discovered = discover(search_path, policy);
    for (const auto& backend : discovered) infos.push_back(backend.info);
  });
}

Backend& Runtime::Impl::live_backend(std::string_view name) {
  ensure_discovered();
  for (auto& backend : discovered) {
    if (backend.info.name != name) continue;
    if (backend.backend) return *backend.backend;
    throw Error(backend.info.status == BackendStatus::kUnavailable ? ErrorCode::kUnavailable
                                                                   : ErrorCode::kNotFound,
                fmt::format("backend '{}' is {}: {}", name, to_string(backend.info.status), backend.info.reason));
  }
  std::vector<std::string> names;
  for (const auto& backend : discovered) names.push_back(backend.info.name);
  throw Error(ErrorCode::kNotFound, fmt::format("no backend '{}'; backends found: {}", name,
                                                names.empty() ? "none" : fmt::format("{}", fmt::join(names, ", "))));
}

Runtime& Runtime::process_default() {
  // Never destroyed: plugins with live devices must outlive static destructors.
  static Runtime* runtime = new Runtime();
  return *runtime;
}

Runtime::Runtime() : Runtime(Options{}) {}

Runtime::Runtime(Options options)
    : impl_(std::make_unique<Impl>(std::move(options), Environment::process())) {
  if (impl_->options.ignore_environment) impl_->environment = Environment::fixed({});
}

Runtime::~Runtime() = default;

std::vector<SearchPathEntry> Runtime::search_path() const {
  impl_->ensure_discovered();
  return impl_->search_path;
}

const std::vector<BackendInfo>& Runtime::backends() const {
  impl_->ensure_discovered();
  return impl_->infos;
}

const BackendInfo* Runtime::find_backend(std::string_view name) const {
  for (const auto& info : backends()) {
    if (info.name == name) return &info;
  }
  return nullptr;
}

bool Runtime::is_available(std::string_view name) const {
  const BackendInfo* info = find_backend(name);
  return info != nullptr && info->status == BackendStatus::kAvailable;
}

std::vector<DeviceInfo> Runtime::devices(std::string_view backend_name) const {
  Backend& backend = impl_->live_backend(backend_name);
  std::vector<DeviceInfo> devices;
  int count = backend.device_count();
  for (int ordinal = 0; ordinal < count; ++ordinal) devices.push_back(backend.device_info(ordinal));
  return devices;
}

std::vector<DeviceInfo> Runtime::devices() const {
  std::vector<const BackendInfo*> available;
  for (const auto& info : backends()) {
    if (info.status == BackendStatus::kAvailable) available.push_back(&info);
  }
  std::stable_sort(available.begin(), available.end(),
                   [](const BackendInfo* a, const BackendInfo* b) { return a->priority > b->priority; });
  std::vector<DeviceInfo> all;
  for (const BackendInfo* info : available) {
    auto devices = this->devices(info->name);
    std::move(devices.begin(), devices.end(), std::back_inserter(all));
  }
  return all;
}

}  // namespace backplane
