#include "registry/device.hpp"

#include <fmt/format.h>

namespace backplane::detail {
namespace {

std::string device_list(const std::string& backend, int count) {
  if (count <= 0) return "no devices";
  if (count == 1) return fmt::format("1 device ({}:0)", backend);
  return fmt::format("{} devices ({}:0..{}:{})", count, backend, backend, count - 1);
}

}  // namespace

void check_ordinal(const Device& device, int count, std::string_view named) {
  if (device.ordinal >= 0 && device.ordinal < count) return;
  // The cpu plugin makes as many devices as its `devices` option asks for
  // (1 by default): say where, since "has 1 device" alone reads as a limit
  // of the machine.
  const std::string more = device.backend == "cpu"
                               ? fmt::format(
                                     "; to have {} cpu devices, set devices = {} under [backend.cpu] in the "
                                     "config file",
                                     device.ordinal + 1, device.ordinal + 1)
                               : std::string();
  throw Error(ErrorCode::kOutOfRange, fmt::format("device '{}' is out of range: backend '{}' has {}{}",
                                                  named.empty() ? device.selector() : std::string(named),
                                                  device.backend, device_list(device.backend, count), more));
}

LiveDevice::LiveDevice(Device device, std::shared_ptr<Backend> backend)
    : device_(std::move(device)),
      selector_(device_.selector()),
      backend_(std::move(backend)),
      host_addressable_(backend_->has(BP_CAPABILITY_HOST_ADDRESSABLE)),
      asynchronous_(backend_->has(BP_CAPABILITY_ASYNC)),
      converts_integers_(backend_->has(BP_CAPABILITY_CONVERT_INTEGERS) && backend_->api().convert_integers != nullptr),
      memory_(std::make_shared<CachingAllocator>(backend_, device_.ordinal, BP_MEMORY_DEVICE, selector_)) {
  // A backend probed in the helper answered from its snapshot so far; from
  // here on it is the plugin's (live memory figures).
  backend_->begin_device_use();
  // Pinned staging only helps where device memory is not host memory already:
  // not on host-addressable backends, and not on a CPU device behind a
  // runtime with its own memory (an OpenCL CPU device), whose driver copies
  // from pageable memory with one memcpy where staging would add a second.
  if (backend_->has(BP_CAPABILITY_PINNED_HOST) && !host_addressable_ &&
      backend_->device_info(device_.ordinal).kind != DeviceKind::kCpu) {
    pinned_ =
        std::make_shared<CachingAllocator>(backend_, device_.ordinal, BP_MEMORY_PINNED_HOST, selector_ + " pinned");
  }
}

}  // namespace backplane::detail
