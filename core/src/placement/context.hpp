// Per-runtime placement state: one DeviceContext per device that has been
// used, and the transfer threads.
#pragma once

#include "placement/allocator.hpp"
#include "placement/executor.hpp"
#include "registry/backend.hpp"
#include "registry/runtime_impl.hpp"

#include <backplane/backplane.hpp>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

namespace backplane {

struct PlacementState;

// One device as placement sees it: its backend (kept alive), what the backend
// can do, and its allocators. Shared by every array on the device.
struct DeviceContext {
  Device device;
  std::string selector;  // "sim:0"
  std::shared_ptr<Backend> backend;
  int ordinal = 0;
  bool host_addressable = false;  // buffer addresses are host pointers
  bool asynchronous = false;      // async copies overlap the caller
  // Cleared when the backend answers convert_integers with kUnsupported (its
  // kernel cannot run on this device): later batches widen on the host.
  std::atomic<bool> converts_integers = false;
  std::shared_ptr<CachingAllocator> memory;  // device memory
  std::shared_ptr<CachingAllocator> pinned;  // pinned staging; null when not offered
  // The runtime's placement state, for device_put without a Runtime; expired
  // once the runtime is gone.
  std::weak_ptr<PlacementState> placement;
};

struct PlacementState : std::enable_shared_from_this<PlacementState> {
  // Few threads: they mostly wait on device events, and each transfer's own
  // pipeline already overlaps host copies with device copies.
  static constexpr unsigned kTransferThreads = 4;

  explicit PlacementState(Runtime::Impl& runtime) : runtime(runtime), executor(kTransferThreads) {}

  // The context of `device`, made on first use. Throws what Runtime::resolve
  // would for an unknown/unavailable backend or an out-of-range ordinal.
  std::shared_ptr<DeviceContext> context(const Device& device);

  Runtime::Impl& runtime;
  TransferExecutor executor;

 private:
  std::mutex mutex_;
  std::map<std::pair<std::string, int>, std::shared_ptr<DeviceContext>> contexts_;
  std::map<std::string, int, std::less<>> device_counts_;
};

// The runtime's placement state, made on first use.
std::shared_ptr<PlacementState> placement_of(Runtime& runtime);

}  // namespace backplane
