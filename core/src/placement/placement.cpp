#include "placement/placement.hpp"

#include "registry/runtime_impl.hpp"
#include "util/caught_error.hpp"

#include <backplane/array.hpp>

#include <fmt/format.h>

#include <optional>

namespace backplane {
using detail::CachingAllocator;

namespace detail {

std::shared_ptr<Placement> placement_of(Runtime& runtime) {
  auto& impl = RuntimeAccess::impl(runtime);
  std::call_once(impl.placement_once, [&impl] { impl.placement = std::make_shared<Placement>(impl.registry); });
  return impl.placement;
}

std::shared_ptr<Completion> Placement::run(std::string description, std::function<void()> work,
                                           std::optional<TransferTrace> transfer) {
  auto arrival = std::make_shared<Completion>(std::move(description));
  if (transfer) arrival->trace_as(std::move(*transfer));
  auto shared_work = std::make_shared<std::function<void()>>(std::move(work));
  executor_.submit([arrival, shared_work]() mutable {
    std::optional<CaughtError> failure;
    try {
      (*shared_work)();
    } catch (...) {
      failure = caught_error();
    }
    shared_work.reset();  // buffers go back to their caches before anyone sees "done"
    if (failure) {
      arrival->finish_error(failure->code, failure->message);
    } else {
      arrival->finish_ok();
    }
  });
  return arrival;
}

}  // namespace detail

MemoryStats memory_stats(Runtime& runtime, const Device& device) {
  const auto live = detail::RuntimeAccess::registry(runtime).device(device);
  const auto memory = live->memory().counters();
  MemoryStats stats;
  stats.in_use = memory.in_use;
  stats.cached = memory.cached;
  stats.peak = memory.peak;
  stats.backend_allocations = memory.backend_allocations;
  stats.backend_frees = memory.backend_frees;
  if (const CachingAllocator* staging = live->pinned()) {
    const auto pinned = staging->counters();
    stats.pinned_in_use = pinned.in_use;
    stats.pinned_cached = pinned.cached;
    stats.pinned_backend_allocations = pinned.backend_allocations;
  }
  // A fresh answer from the plugin: free memory moves with every allocation.
  const DeviceInfo info = live->backend().device_info(live->ordinal());
  stats.memory_total = info.memory_total;
  stats.memory_free = info.memory_free;
  return stats;
}

void reset_peak(Runtime& runtime, const Device& device) {
  const auto live = detail::RuntimeAccess::registry(runtime).device(device);
  live->memory().reset_peak();
  if (CachingAllocator* staging = live->pinned()) staging->reset_peak();
}

void empty_cache(Runtime& runtime, const Device& device) {
  const auto live = detail::RuntimeAccess::registry(runtime).device(device);
  live->memory().empty_cache();
  if (CachingAllocator* staging = live->pinned()) staging->empty_cache();
}

}  // namespace backplane
