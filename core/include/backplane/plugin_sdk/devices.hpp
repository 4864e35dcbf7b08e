// A backend's devices: what probe found about each, numbered by ordinal, and
// started (a context, a queue) once, on first use, by whichever thread gets
// there first. A backend's Device derives from DeviceBase and adds its own
// fields; its backend keeps them in a Devices<Device>.
#ifndef BACKPLANE_PLUGIN_SDK_DEVICES_HPP
#define BACKPLANE_PLUGIN_SDK_DEVICES_HPP

#include <backplane/plugin.h>
#include <backplane/plugin_support.hpp>

#include <atomic>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace backplane::plugin_sdk {

template <class Device>
class Devices;

// What the SDK needs of every device; probe fills in both fields.
class DeviceBase {
 public:
  std::int32_t ordinal = 0;
  std::string label;  // "<backend>:<ordinal>", for messages

  // Whether start has succeeded; what it set up is visible once this is true.
  bool started() const noexcept { return started_.load(std::memory_order_acquire); }

 private:
  template <class Device>
  friend class Devices;
  std::mutex start_mutex_;
  std::atomic<bool> started_{false};
};

template <class Device>
class Devices {
 public:
  // The devices probe found, in ordinal order; replaces any earlier ones.
  void assign(std::vector<std::unique_ptr<Device>> devices) {
    static_assert(std::derived_from<Device, DeviceBase>, "a backend's Device must derive from plugin_sdk::DeviceBase");
    devices_ = std::move(devices);
  }

  std::int32_t count() const noexcept { return static_cast<std::int32_t>(devices_.size()); }

  // The device numbered `ordinal`. The SDK checks ordinals before a hook
  // runs, so an ordinal out of range here is the backend's own mistake:
  // BP_ERROR_INTERNAL, not a crash.
  Device& at(std::int32_t ordinal) const {
    if (ordinal < 0 || ordinal >= count()) [[unlikely]]
      throw_out_of_range(ordinal, count());
    return *devices_[static_cast<std::size_t>(ordinal)];
  }

  // `device`, started: `start(device)` runs the first time, under the
  // device's own lock; if it throws, the device stays unstarted and the next
  // use tries again. Later calls cost one acquire load.
  template <class Start>
  Device& start(Device& device, Start&& start) {
    if (device.started()) [[likely]]
      return device;
    const std::lock_guard lock(device.start_mutex_);
    if (!device.started_.load(std::memory_order_relaxed)) {
      std::forward<Start>(start)(device);
      device.started_.store(true, std::memory_order_release);
    }
    return device;
  }

  template <class Start>
  Device& start(std::int32_t ordinal, Start&& start) {
    return this->start(at(ordinal), std::forward<Start>(start));
  }

  // Every device, in ordinal order (for a destructor that stops the started ones).
  auto begin() const { return Iterator{devices_.begin()}; }
  auto end() const { return Iterator{devices_.end()}; }

 private:
  using Stored = typename std::vector<std::unique_ptr<Device>>::const_iterator;

  struct Iterator {
    Stored at;
    Device& operator*() const { return **at; }
    Iterator& operator++() {
      ++at;
      return *this;
    }
    bool operator==(const Iterator& other) const = default;
  };

  [[noreturn, gnu::cold, gnu::noinline]] static void throw_out_of_range(std::int32_t ordinal, std::int32_t count) {
    throw Failure(BP_ERROR_INTERNAL, "device ordinal " + std::to_string(ordinal) +
                                         " is out of range inside the backend: it has " + std::to_string(count) +
                                         " device(s)");
  }

  std::vector<std::unique_ptr<Device>> devices_;
};

}  // namespace backplane::plugin_sdk

#endif  // BACKPLANE_PLUGIN_SDK_DEVICES_HPP
