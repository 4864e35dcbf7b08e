// Selectors and the default device (DESIGN.md "Default backend and default
// device"): five precedence levels, the highest that is set decides.
#include "config/selector.hpp"
#include "registry/runtime_impl.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

namespace backplane {
namespace {

// The thread's scoped overrides, innermost last. Each entry is tagged with
// its runtime's id (not its address, which a later runtime may reuse) so that
// independent runtimes never see each other's scopes.
struct ScopedOverride {
  std::uint64_t runtime_id;
  Device device;
};
thread_local std::vector<ScopedOverride> scoped_overrides;

std::string device_list(const std::string& backend, int count) {
  if (count == 0) return "no devices";
  if (count == 1) return fmt::format("1 device ({}:0)", backend);
  return fmt::format("{} devices ({}:0..{}:{})", count, backend, backend, count - 1);
}

}  // namespace

std::string_view to_string(DeviceSource source) noexcept {
  switch (source) {
    case DeviceSource::kScopedOverride: return "scoped override";
    case DeviceSource::kProcessSetting: return "set in code";
    case DeviceSource::kEnvironment: return "BACKPLANE_DEFAULT_DEVICE";
    case DeviceSource::kConfigFile: return "config default_device";
    case DeviceSource::kAutomatic: return "highest-priority available backend";
  }
  return "unknown";
}

std::vector<const DiscoveredBackend*> Runtime::Impl::preference_order() const {
  std::vector<const DiscoveredBackend*> order;
  if (backend_order) {
    for (const auto& name : *backend_order) {
      if (const DiscoveredBackend* backend = find(name)) order.push_back(backend);
    }
    return order;
  }
  for (const auto& backend : discovered) {
    if (backend.info.status != BackendStatus::kShadowed) order.push_back(&backend);
  }
  std::stable_sort(order.begin(), order.end(), [](const DiscoveredBackend* a, const DiscoveredBackend* b) {
    return a->info.priority > b->info.priority;
  });
  return order;
}

Device Runtime::resolve(std::string_view selector) const {
  DeviceSelector parsed = parse_selector(selector);
  impl_->ensure_discovered();
  Backend& backend = impl_->live_backend(parsed.backend);  // throws naming the backends
  int count = backend.device_count();
  int ordinal = parsed.ordinal.value_or(0);
  if (ordinal >= count) {
    throw Error(ErrorCode::kOutOfRange,
                fmt::format("device '{}' is out of range: backend '{}' has {}", selector, parsed.backend,
                            device_list(parsed.backend, count)));
  }
  return Device{parsed.backend, ordinal};
}

std::optional<Device> Runtime::current_scoped_device() const {
  for (auto entry = scoped_overrides.rbegin(); entry != scoped_overrides.rend(); ++entry) {
    if (entry->runtime_id == impl_->id) return entry->device;
  }
  return std::nullopt;
}

void Runtime::set_default_device(std::optional<std::string_view> selector) {
  std::optional<Device> device;
  if (selector) device = resolve(*selector);
  std::lock_guard lock(impl_->process_default_mutex);
  impl_->process_default = std::move(device);
}

DefaultDevice Runtime::default_device() const {
  impl_->ensure_discovered();
  if (auto scoped = current_scoped_device()) return {*scoped, DeviceSource::kScopedOverride, {}};
  {
    std::lock_guard lock(impl_->process_default_mutex);
    if (impl_->process_default) return {*impl_->process_default, DeviceSource::kProcessSetting, {}};
  }
  auto resolve_named = [&](const std::string& selector, std::string_view where) {
    try {
      return resolve(selector);
    } catch (const Error& error) {
      throw Error(error.code(), fmt::format("default device from {}: {}", where, error.what()));
    }
  };
  if (auto selector = impl_->environment.get("BACKPLANE_DEFAULT_DEVICE"); selector && !selector->empty()) {
    return {resolve_named(*selector, "BACKPLANE_DEFAULT_DEVICE=" + *selector), DeviceSource::kEnvironment, {}};
  }
  if (impl_->config.default_device) {
    return {resolve_named(*impl_->config.default_device,
                          fmt::format("default_device in {}", impl_->config.path->string())),
            DeviceSource::kConfigFile, {}};
  }

  // Automatic: a backend the user listed explicitly must be usable; otherwise
  // fall back down the priority order and record why.
  if (impl_->backend_order) {
    for (const auto& name : *impl_->backend_order) {
      if (impl_->find(name) == nullptr) {
        throw Error(ErrorCode::kNotFound, fmt::format("{} names backend '{}', which was not found; backends: {}",
                                                      impl_->backend_order_source, name, impl_->describe_backends()));
      }
    }
    const std::string& first = impl_->backend_order->front();
    try {
      return {resolve(first), DeviceSource::kAutomatic, {}};
    } catch (const Error& error) {
      throw Error(error.code(), fmt::format("{} puts '{}' first: {}", impl_->backend_order_source, first, error.what()));
    }
  }
  std::vector<std::string> passed_over;
  for (const DiscoveredBackend* backend : impl_->preference_order()) {
    const BackendInfo& info = backend->info;
    if (info.status == BackendStatus::kDisabled) continue;
    if (!backend->backend) {
      passed_over.push_back(fmt::format("{} ({}: {})", info.name, to_string(info.status), info.reason));
      continue;
    }
    if (backend->backend->device_count() == 0) {
      passed_over.push_back(fmt::format("{} (available but has no devices)", info.name));
      continue;
    }
    std::string note;
    if (!passed_over.empty()) note = fmt::format("passed over: {}", fmt::join(passed_over, "; "));
    return {Device{info.name, 0}, DeviceSource::kAutomatic, std::move(note)};
  }
  throw Error(ErrorCode::kUnavailable,
              fmt::format("no available backend has a device; backends: {}", impl_->describe_backends()));
}

DefaultDeviceScope::DefaultDeviceScope(const Runtime& runtime, std::string_view selector)
    : DefaultDeviceScope(runtime, runtime.resolve(selector)) {}

DefaultDeviceScope::DefaultDeviceScope(const Runtime& runtime, Device device) {
  scoped_overrides.push_back({runtime.impl().id, std::move(device)});
  pushed_ = true;
}

DefaultDeviceScope::DefaultDeviceScope(const Runtime& runtime, std::optional<Device> captured) {
  if (captured) {
    scoped_overrides.push_back({runtime.impl().id, std::move(*captured)});
    pushed_ = true;
  }
}

DefaultDeviceScope::~DefaultDeviceScope() {
  if (pushed_) scoped_overrides.pop_back();
}

}  // namespace backplane
