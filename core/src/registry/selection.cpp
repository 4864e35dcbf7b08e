// Selectors and the default device: five precedence levels, the highest that
// is set decides (docs/configuration.md "Default device precedence").
#include "config/selector.hpp"
#include "registry/runtime_impl.hpp"
#include "util/local_rank.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

namespace backplane {
using detail::Backend;
using detail::check_ordinal;
using detail::DeviceSelector;
using detail::DiscoveredBackend;
using detail::Environment;
using detail::LocalRank;
using detail::parse_selector;
namespace {

// A malformed value is an error rather than a warning: ignoring it would put
// every rank of a job on device 0, the silent pile-up this level exists to
// prevent.
std::optional<LocalRank> local_rank(const Environment& environment) {
  return detail::local_rank(environment,
                            "the launcher's local rank picks the default device (set BACKPLANE_DEFAULT_DEVICE or "
                            "choose a device in code to override it)");
}

// Level 5 on `backend`: device 0, or in a data-parallel job the local rank's
// share of the backend's devices.
DefaultDevice automatic_choice(const std::optional<LocalRank>& rank, const std::string& backend, int device_count,
                               std::string note) {
  if (!rank) {
    return {Device{backend, 0}, DeviceSource::kAutomatic, std::move(note),
            std::string(to_string(DeviceSource::kAutomatic))};
  }
  const auto ordinal = static_cast<int>(rank->rank % static_cast<std::uint64_t>(device_count));
  return {Device{backend, ordinal}, DeviceSource::kLocalRank, std::move(note),
          fmt::format("{}={}", rank->variable, rank->value)};
}

}  // namespace

std::string_view to_string(DeviceSource source) noexcept {
  switch (source) {
    case DeviceSource::kScopedOverride: return "scoped override";
    case DeviceSource::kProcessSetting: return "set in code";
    case DeviceSource::kEnvironment: return "BACKPLANE_DEFAULT_DEVICE";
    case DeviceSource::kConfigFile: return "config default_device";
    case DeviceSource::kAutomatic: return "highest-priority available backend";
    case DeviceSource::kLocalRank: return "local rank";
  }
  return "unknown";
}

std::vector<const DiscoveredBackend*> detail::Registry::preference_order() const {
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
  DeviceSelector parsed;
  try {
    parsed = parse_selector(selector);
  } catch (const Error&) {
    // Malformed: parsed again (it throws again) knowing the backends, so
    // that a suggestion names one that exists. Well-formed selectors, the
    // common case, never build the list.
    impl_->registry->ensure_discovered();
    parsed = parse_selector(selector, impl_->registry->backend_names());
  }
  Backend& backend = impl_->registry->live_backend(parsed.backend);  // throws naming the backends
  Device device{parsed.backend, parsed.ordinal.value_or(0)};
  check_ordinal(device, backend.device_count(), selector);
  return device;
}

void Runtime::set_default_device(std::optional<std::string_view> selector) {
  std::optional<Device> device;
  if (selector) device = resolve(*selector);
  std::lock_guard lock(impl_->registry->process_default_mutex);
  impl_->registry->process_default = std::move(device);
}

DefaultDevice Runtime::default_device() const {
  impl_->registry->ensure_discovered();
  auto named = [](Device device, DeviceSource source) {
    return DefaultDevice{std::move(device), source, {}, std::string(to_string(source))};
  };
  if (auto scoped = current_scoped_device()) return named(*scoped, DeviceSource::kScopedOverride);
  {
    std::lock_guard lock(impl_->registry->process_default_mutex);
    if (impl_->registry->process_default)
      return named(*impl_->registry->process_default, DeviceSource::kProcessSetting);
  }
  auto resolve_named = [&](const std::string& selector, std::string_view where) {
    try {
      return resolve(selector);
    } catch (const Error& error) {
      throw Error(error.code(), fmt::format("default device from {}: {}", where, error.what()));
    }
  };
  if (auto selector = impl_->registry->environment.get("BACKPLANE_DEFAULT_DEVICE"); selector && !selector->empty()) {
    return named(resolve_named(*selector, "BACKPLANE_DEFAULT_DEVICE=" + *selector), DeviceSource::kEnvironment);
  }
  if (impl_->registry->config.default_device) {
    return named(resolve_named(*impl_->registry->config.default_device,
                               fmt::format("default_device in {}", impl_->registry->config.path->string())),
                 DeviceSource::kConfigFile);
  }

  // Automatic: a backend the user listed explicitly must be usable; otherwise
  // fall back down the priority order and record why. The backend order picks
  // the backend only: in a data-parallel job the local rank still picks its
  // device.
  const std::optional<LocalRank> rank = local_rank(impl_->registry->environment);
  if (impl_->registry->backend_order) {
    for (const auto& name : *impl_->registry->backend_order) {
      if (impl_->registry->find(name) == nullptr) {
        throw Error(ErrorCode::kNotFound,
                    fmt::format("{} names backend '{}', which was not found; backends: {}",
                                impl_->registry->backend_order_source, name, impl_->registry->describe_backends()));
      }
    }
    const std::string& first = impl_->registry->backend_order->front();
    try {
      resolve(first);  // usable, with at least one device
      return automatic_choice(rank, first, impl_->registry->live_backend(first).device_count(), {});
    } catch (const Error& error) {
      throw Error(error.code(),
                  fmt::format("{} puts '{}' first: {}", impl_->registry->backend_order_source, first, error.what()));
    }
  }
  // A backend the user configured and that failed is the user's to fix,
  // wherever its (unknown) priority would place it: quietly placing their
  // data on another backend would hide the mistake.
  for (const DiscoveredBackend* entry : impl_->registry->preference_order()) {
    const auto configured = impl_->registry->configured.find(entry->info.name);
    if (entry->info.status == BackendStatus::kFailed && configured != impl_->registry->configured.end()) {
      throw Error(ErrorCode::kConfig,
                  fmt::format("cannot choose the default device: backend '{}', configured by {}, failed: {}; fix "
                              "its configuration, or name a device explicitly",
                              entry->info.name, configured->second, entry->info.reason));
    }
  }
  std::vector<std::string> passed_over;
  for (const DiscoveredBackend* entry : impl_->registry->preference_order()) {
    const BackendInfo& info = entry->info;
    if (info.status == BackendStatus::kDisabled) continue;
    if (!entry->live) {
      passed_over.push_back(fmt::format("{} ({}: {})", info.name, to_string(info.status), info.reason));
      continue;
    }
    if (entry->live->device_count() == 0) {
      passed_over.push_back(fmt::format("{} (available but has no devices)", info.name));
      continue;
    }
    std::string note;
    if (!passed_over.empty()) note = fmt::format("passed over: {}", fmt::join(passed_over, "; "));
    return automatic_choice(rank, info.name, entry->live->device_count(), std::move(note));
  }
  throw Error(ErrorCode::kUnavailable,
              fmt::format("no available backend has a device; backends: {}", impl_->registry->describe_backends()));
}

}  // namespace backplane
