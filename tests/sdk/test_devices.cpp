// The SDK's device object: ordinals checked, each device started once on
// first use whatever the number of threads asking, a failed start tried
// again; and the deprecated namespace alias still names the SDK's types.
#include <backplane/plugin_sdk/devices.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

namespace sdk = backplane::plugin_sdk;

static_assert(std::is_same_v<backplane::plugin::Failure, sdk::Failure>,
              "plugins written against backplane::plugin keep compiling");

namespace {

struct Device : sdk::DeviceBase {
  int queue = 0;  // what start sets up
};

sdk::Devices<Device> make_devices(int count) {
  std::vector<std::unique_ptr<Device>> found;
  for (int ordinal = 0; ordinal < count; ++ordinal) {
    auto device = std::make_unique<Device>();
    device->ordinal = ordinal;
    device->label = "demo:" + std::to_string(ordinal);
    found.push_back(std::move(device));
  }
  sdk::Devices<Device> devices;
  devices.assign(std::move(found));
  return devices;
}

}  // namespace

TEST_CASE("devices: looked up by ordinal; one out of range is an error naming it, not a crash") {
  const sdk::Devices<Device> devices = make_devices(2);
  CHECK(devices.count() == 2);
  CHECK(devices.at(1).label == "demo:1");
  for (const int ordinal : {-1, 2}) {
    try {
      (void)devices.at(ordinal);
      FAIL("an ordinal out of range was accepted");
    } catch (const sdk::Failure& failure) {
      CHECK(failure.code() == BP_ERROR_INTERNAL);
      CHECK(std::string(failure.what()) ==
            "device ordinal " + std::to_string(ordinal) + " is out of range inside the backend: it has 2 device(s)");
    }
  }
}

TEST_CASE("devices: start runs once per device, however many threads use it at once") {
  sdk::Devices<Device> devices = make_devices(2);
  std::atomic<int> starts{0};
  std::vector<std::thread> threads;
  for (int thread = 0; thread < 8; ++thread) {
    threads.emplace_back([&] {
      Device& device = devices.start(0, [&](Device& starting) {
        ++starts;
        starting.queue = 42;
      });
      CHECK(device.queue == 42);
    });
  }
  for (auto& thread : threads) thread.join();
  CHECK(starts == 1);
  CHECK(devices.at(0).started());
  CHECK_FALSE(devices.at(1).started());
  int started = 0;
  for (const Device& device : devices) started += device.started() ? 1 : 0;
  CHECK(started == 1);
}

TEST_CASE("devices: a start that throws leaves the device unstarted, and the next use tries again") {
  sdk::Devices<Device> devices = make_devices(1);
  CHECK_THROWS_WITH_AS(devices.start(0, [](Device&) { throw sdk::Failure(BP_ERROR_DEVICE, "no queue today"); }),
                       "no queue today", sdk::Failure);
  CHECK_FALSE(devices.at(0).started());
  Device& device = devices.start(0, [](Device& starting) { starting.queue = 7; });
  CHECK(device.started());
  CHECK(device.queue == 7);
}
