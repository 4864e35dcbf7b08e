#include "registry/allocator.hpp"

#include "trace/trace.hpp"
#include "util/bytes.hpp"

#include <fmt/format.h>

#include <optional>
#include <utility>
#include <vector>

namespace backplane::detail {
namespace {

std::uint64_t round_up(std::uint64_t size) {
  constexpr std::uint64_t kGranularity = CachingAllocator::kGranularity;
  if (size == 0) return kGranularity;
  if (size > UINT64_MAX - kGranularity) return size;  // the backend will refuse it
  return (size + kGranularity - 1) / kGranularity * kGranularity;
}

const char* memory_name(BP_MemoryKind kind) { return kind == BP_MEMORY_PINNED_HOST ? "pinned" : "device"; }

}  // namespace

Block::~Block() { allocator_->give_back(buffer_, address_, size_); }

CachingAllocator::~CachingAllocator() { empty_cache(); }

std::shared_ptr<Block> CachingAllocator::allocate(std::uint64_t size) {
  const std::uint64_t rounded = round_up(size);
  std::optional<std::pair<std::uint64_t, Cached>> reused;
  std::optional<Counters> traced;  // the counters after this change, while tracing
  {
    const std::lock_guard lock(mutex_);
    // A cached block fits when it wastes at most a quarter of itself.
    for (auto found = cache_.lower_bound(rounded); found != cache_.end() && found->first - rounded <= found->first / 4;
         ++found) {
      if (found->second.empty()) continue;
      reused.emplace(found->first, found->second.back());
      found->second.pop_back();
      counters_.cached -= found->first;
      counters_.in_use += found->first;
      counters_.peak = std::max(counters_.peak, counters_.in_use);
      if (trace::enabled()) traced = counters_;
      break;
    }
  }
  if (traced) trace_counters(*traced);
  if (reused) {
    const auto& [block_size, cached] = *reused;
    try {
      return std::make_shared<Block>(shared_from_this(), cached.buffer, cached.address, block_size);
    } catch (...) {
      give_back(cached.buffer, cached.address, block_size);
      throw;
    }
  }
  Backend::Allocation allocation;
  auto traced_call = trace::Span::nested(trace::category::kAllocation, trace::event::kAllocate);
  if (traced_call.active()) {
    traced_call.arg({"bytes", rounded});
    traced_call.arg({"device", selector_});
    traced_call.arg({"memory", memory_name(kind_)});
  }
  try {
    allocation = backend_->allocate(ordinal_, kind_, rounded);
  } catch (const Error& error) {
    if (error.code() != ErrorCode::kOutOfMemory) throw;
    const std::uint64_t released = empty_cache();
    try {
      allocation = backend_->allocate(ordinal_, kind_, rounded);
    } catch (const Error& again) {
      if (again.code() != ErrorCode::kOutOfMemory) throw;
      throw_out_of_memory(size, released, again);
    }
  }
  {
    const std::lock_guard lock(mutex_);
    ++counters_.backend_allocations;
    counters_.in_use += rounded;
    counters_.peak = std::max(counters_.peak, counters_.in_use);
    if (trace::enabled()) traced = counters_;
  }
  if (traced) trace_counters(*traced);
  try {
    return std::make_shared<Block>(shared_from_this(), allocation.buffer, allocation.address, rounded);
  } catch (...) {
    give_back(allocation.buffer, allocation.address, rounded);
    throw;
  }
}

void CachingAllocator::throw_out_of_memory(std::uint64_t size, std::uint64_t released, const Error& cause) const {
  std::string memory = "free/total memory unknown";
  try {
    const DeviceInfo info = backend_->device_info(ordinal_);
    memory = fmt::format("{} free of {}", info.memory_free ? describe_bytes(*info.memory_free) : "unknown",
                         describe_bytes(info.memory_total));
  } catch (const Error&) {  // keep the allocation's own error as the story
  }
  const Counters now = counters();
  const char* what = kind_ == BP_MEMORY_PINNED_HOST ? "pinned host memory" : "device memory";
  throw Error(ErrorCode::kOutOfMemory,
              fmt::format("out of {} on {}: cannot allocate {}; {} ({} held by live arrays; {} of cached blocks "
                          "were released and the allocation retried); the backend said: {}",
                          what, selector_, describe_bytes(size), memory, describe_bytes(now.in_use),
                          describe_bytes(released), cause.what()));
}

void CachingAllocator::give_back(BP_Buffer* buffer, void* address, std::uint64_t size) noexcept {
  std::optional<Counters> traced;
  bool kept = false;
  {
    const std::lock_guard lock(mutex_);
    counters_.in_use -= size;
    try {
      cache_[size].push_back(Cached{buffer, address});
      counters_.cached += size;
      kept = true;
    } catch (...) {  // no memory for the cache entry: hand the block back instead
      ++counters_.backend_frees;
    }
    if (trace::enabled()) traced = counters_;
  }
  if (traced) trace_counters(*traced);
  if (kept) return;
  auto traced_call = trace::Span::nested(trace::category::kAllocation, trace::event::kFree);
  if (traced_call.active()) {
    traced_call.arg({"bytes", size});
    traced_call.arg({"device", selector_});
    traced_call.arg({"memory", memory_name(kind_)});
  }
  backend_->free(buffer);  // outside the lock: see mutex_
}

void CachingAllocator::trace_counters(const Counters& now) const noexcept {
  try {
    trace::counter(fmt::format("{} memory {}", memory_name(kind_), selector_),
                   {{"in_use", now.in_use}, {"cached", now.cached}});
  } catch (...) {  // no memory for the name: the sample is lost
  }
}

std::uint64_t CachingAllocator::empty_cache() {
  auto traced_call = trace::Span::nested(trace::category::kAllocation, trace::event::kEmptyCache);
  std::map<std::uint64_t, std::vector<Cached>> released;
  {
    const std::lock_guard lock(mutex_);
    released.swap(cache_);
    counters_.cached = 0;
  }
  std::uint64_t bytes = 0;
  std::uint64_t frees = 0;
  for (const auto& [size, blocks] : released) {
    for (const Cached& cached : blocks) {
      backend_->free(cached.buffer);
      bytes += size;
      ++frees;
    }
  }
  std::optional<Counters> traced;
  {
    const std::lock_guard lock(mutex_);
    counters_.backend_frees += frees;
    if (trace::enabled()) traced = counters_;
  }
  if (traced) {
    trace_counters(*traced);
    traced_call.arg({"bytes", bytes});
    traced_call.arg({"frees", frees});
    traced_call.arg({"device", selector_});
  }
  return bytes;
}

void CachingAllocator::reset_peak() {
  const std::lock_guard lock(mutex_);
  counters_.peak = counters_.in_use;
}

CachingAllocator::Counters CachingAllocator::counters() const {
  const std::lock_guard lock(mutex_);
  return counters_;
}

}  // namespace backplane::detail
