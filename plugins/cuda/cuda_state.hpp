// The CUDA backend's devices, shared by its translation units. Internal;
// included only from .cu files.
#ifndef BACKPLANE_PLUGINS_CUDA_CUDA_STATE_HPP
#define BACKPLANE_PLUGINS_CUDA_CUDA_STATE_HPP

#include "cuda_backend.hpp"
#include "cuda_driver.hpp"

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace backplane::cuda {

// A timing event with a known host time: device times are measured from it
// (cuEventElapsedTime) and placed on the host's CLOCK_MONOTONIC by adding
// `host_ns`. Shared by the events timed against it, which outlive a newer
// reference.
struct TimingReference {
  const DriverApi* driver = nullptr;
  CUevent event = nullptr;
  std::int64_t host_ns = 0;  // CLOCK_MONOTONIC when the event completed, to within half of `uncertainty_ns`
  std::int64_t uncertainty_ns = 0;
  ~TimingReference();
};

// One GPU as the driver numbers it (after CUDA_VISIBLE_DEVICES). Started
// (context and stream) on first use, through the backend's sdk::Devices.
struct Device : sdk::DeviceBase {
  CUdevice handle = 0;
  std::string name;
  std::uint64_t memory_total = 0;
  std::vector<std::pair<std::string, std::string>> attributes;

  CUcontext context = nullptr;  // retained primary context, set when started
  CUstream stream = nullptr;    // every operation on this device runs here; set when started
  std::mutex mutex;             // guards the two below
  // Whether the widening kernel runs here, asked on the first conversion:
  // empty when it does, else why not.
  bool widen_checked = false;
  std::string widen_unavailable;

  std::mutex timing_mutex;  // guards reference
  std::shared_ptr<TimingReference> reference;
};

// Makes the device's context current for one scope and restores the caller's.
class ContextScope {
 public:
  // Throws Failure when the context cannot be made current.
  ContextScope(const DriverApi& driver, const Device& device) : driver_(driver) {
    check(driver, driver.cuCtxPushCurrent(device.context), [&] { return "cuCtxPushCurrent on " + device.label; });
  }
  ~ContextScope() {
    CUcontext popped = nullptr;
    driver_.cuCtxPopCurrent(&popped);
  }
  ContextScope(const ContextScope&) = delete;
  ContextScope& operator=(const ContextScope&) = delete;

 private:
  const DriverApi& driver_;
};

// What probe found (cuda_probe.cu). Values, not exceptions: every outcome is
// a reason. Creates no context, reserves no memory, starts no thread.
struct ProbeResult {
  sdk::Probe probe;
  const DriverApi* driver = nullptr;  // set when available
  std::vector<std::unique_ptr<Device>> devices;
};
ProbeResult run_probe();

// Makes `waiting`'s stream wait for the work queued so far on `producer`,
// through an event made in the current context (`context_label`'s).
// Throws Failure (cuda_backend.cu).
void order_after(const DriverApi& driver, const Device& waiting, CUstream producer, const std::string& context_label,
                 const std::string& producer_name);

}  // namespace backplane::cuda

#endif  // BACKPLANE_PLUGINS_CUDA_CUDA_STATE_HPP
