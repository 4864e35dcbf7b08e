#include "placement/context.hpp"

#include <backplane/array.hpp>

#include <fmt/format.h>

namespace backplane {

std::shared_ptr<PlacementState> placement_of(Runtime& runtime) {
  Runtime::Impl& impl = runtime.impl();
  std::call_once(impl.placement_once, [&impl] { impl.placement = std::make_shared<PlacementState>(impl); });
  return impl.placement;
}

std::shared_ptr<DeviceContext> PlacementState::context(const Device& device) {
  const std::lock_guard lock(mutex_);
  const auto found = contexts_.find(std::pair(device.backend, device.ordinal));
  if (found != contexts_.end()) return found->second;

  Backend& live = runtime.live_backend(device.backend);  // throws naming the backends
  auto count = device_counts_.find(device.backend);
  if (count == device_counts_.end()) count = device_counts_.emplace(device.backend, live.device_count()).first;
  if (device.ordinal < 0 || device.ordinal >= count->second) {
    throw Error(ErrorCode::kOutOfRange,
                fmt::format("device '{}' is out of range: backend '{}' has {} device(s){}", device.selector(),
                            device.backend, count->second,
                            count->second > 0 ? fmt::format(" ({0}:0..{0}:{1})", device.backend, count->second - 1)
                                              : std::string()));
  }
  auto context = std::make_shared<DeviceContext>();
  context->device = device;
  context->selector = device.selector();
  context->backend = runtime.find(device.backend)->backend;
  context->ordinal = device.ordinal;
  context->host_addressable = live.has(BP_CAPABILITY_HOST_ADDRESSABLE);
  context->asynchronous = live.has(BP_CAPABILITY_ASYNC);
  context->converts_integers = live.has(BP_CAPABILITY_CONVERT_INTEGERS) && live.api().convert_integers != nullptr;
  context->memory =
      std::make_shared<CachingAllocator>(context->backend, device.ordinal, BP_MEMORY_DEVICE, context->selector);
  // Pinned staging only helps where device memory is not host memory already:
  // not on host-addressable backends, and not on a CPU device behind a runtime
  // with its own memory (an OpenCL CPU device), whose driver copies from
  // pageable memory with one memcpy where staging would add a second.
  if (live.has(BP_CAPABILITY_PINNED_HOST) && !context->host_addressable &&
      live.device_info(device.ordinal).kind != DeviceKind::kCpu) {
    context->pinned = std::make_shared<CachingAllocator>(context->backend, device.ordinal, BP_MEMORY_PINNED_HOST,
                                                         context->selector + " pinned");
  }
  context->placement = weak_from_this();
  contexts_.emplace(std::pair(device.backend, device.ordinal), context);
  return context;
}

MemoryStats memory_stats(Runtime& runtime, const Device& device) {
  const auto context = placement_of(runtime)->context(device);
  const auto memory = context->memory->counters();
  MemoryStats stats;
  stats.in_use = memory.in_use;
  stats.cached = memory.cached;
  stats.peak = memory.peak;
  stats.backend_allocations = memory.backend_allocations;
  stats.backend_frees = memory.backend_frees;
  if (context->pinned) {
    const auto pinned = context->pinned->counters();
    stats.pinned_in_use = pinned.in_use;
    stats.pinned_cached = pinned.cached;
    stats.pinned_backend_allocations = pinned.backend_allocations;
  }
  return stats;
}

void empty_cache(Runtime& runtime, const Device& device) {
  const auto context = placement_of(runtime)->context(device);
  context->memory->empty_cache();
  if (context->pinned) context->pinned->empty_cache();
}

}  // namespace backplane
