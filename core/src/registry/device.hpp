// One usable device: the object placement, selection and the C API take.
//
// The registry makes it once per device, after checking the ordinal, and
// keeps it for the runtime's life; every array on the device shares it. It
// binds a Backend to an ordinal (callers never pass one again), records what
// the backend can do there, and owns the device's memory: the caching
// allocator for device memory and, where staging helps, the one for pinned
// staging buffers.
#pragma once

#include "registry/allocator.hpp"
#include "registry/backend.hpp"

#include <backplane/backplane.hpp>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

namespace backplane::detail {

class LiveDevice {
 public:
  // `device`'s ordinal must have been checked (check_ordinal).
  LiveDevice(Device device, std::shared_ptr<Backend> backend);
  LiveDevice(const LiveDevice&) = delete;
  LiveDevice& operator=(const LiveDevice&) = delete;

  const Device& device() const { return device_; }
  const std::string& selector() const { return selector_; }  // "sim:0", for messages
  Backend& backend() const { return *backend_; }
  int ordinal() const { return device_.ordinal; }

  // Buffer addresses are host pointers.
  bool host_addressable() const { return host_addressable_; }
  // Asynchronous copies overlap the caller.
  bool asynchronous() const { return asynchronous_; }
  // The backend widens integers here. Cleared for good by
  // stop_converting_integers() when its kernel turns out not to run on this
  // device; returns true for the call that cleared it.
  bool converts_integers() const { return converts_integers_.load(std::memory_order_relaxed); }
  bool stop_converting_integers() { return converts_integers_.exchange(false); }

  CachingAllocator& memory() const { return *memory_; }
  // Pinned staging memory; null where the device does not offer it or
  // staging would only add a copy.
  CachingAllocator* pinned() const { return pinned_.get(); }

  // The backend's device operations on this device; errors name it.
  void copy_to_device(BP_Buffer* destination, std::uint64_t offset, const void* source, std::uint64_t size) {
    backend_->copy_to_device(ordinal(), destination, offset, source, size);
  }
  void copy_to_host(BP_Buffer* source, std::uint64_t offset, void* destination, std::uint64_t size) {
    backend_->copy_to_host(ordinal(), source, offset, destination, size);
  }
  void copy_device_to_device(BP_Buffer* source, std::uint64_t source_offset, BP_Buffer* destination,
                             std::uint64_t size) {
    backend_->copy_device_to_device(ordinal(), source, source_offset, destination, 0, size);
  }
  PluginEvent copy_to_device_async(BP_Buffer* destination, std::uint64_t offset, const void* source,
                                   std::uint64_t size) {
    return backend_->copy_to_device_async(ordinal(), destination, offset, source, size);
  }
  PluginEvent copy_to_host_async(BP_Buffer* source, std::uint64_t offset, void* destination, std::uint64_t size) {
    return backend_->copy_to_host_async(ordinal(), source, offset, destination, size);
  }
  PluginEvent copy_device_to_device_async(BP_Buffer* source, std::uint64_t source_offset, BP_Buffer* destination,
                                          std::uint64_t size) {
    return backend_->copy_device_to_device_async(ordinal(), source, source_offset, destination, 0, size);
  }
  PluginEvent convert_integers(BP_Buffer* source, BP_IntegerType source_type, BP_Buffer* destination,
                               BP_IntegerType destination_type, std::uint64_t count) {
    return backend_->convert_integers(ordinal(), source, 0, source_type, destination, 0, destination_type, count);
  }
  // A buffer handle over memory the caller owns (see Backend::wrap).
  BP_Buffer* wrap(void* address, std::uint64_t size) { return backend_->wrap(ordinal(), address, size); }

  // The backend, for what must keep it alive (completions, wrapped memory).
  const std::shared_ptr<Backend>& shared_backend() const { return backend_; }

 private:
  const Device device_;
  const std::string selector_;
  const std::shared_ptr<Backend> backend_;
  const bool host_addressable_;
  const bool asynchronous_;
  std::atomic<bool> converts_integers_;
  std::shared_ptr<CachingAllocator> memory_;
  std::shared_ptr<CachingAllocator> pinned_;
};

// The one range check of an ordinal: throws kOutOfRange naming the device
// (as `named`, the selector the user wrote, when given), how many devices
// its backend has and their selectors.
void check_ordinal(const Device& device, int count, std::string_view named = {});

}  // namespace backplane::detail
