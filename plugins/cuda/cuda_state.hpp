// The CUDA backend's state, shared by its translation units: the devices and
// the ABI's opaque handles. Internal; included only from .cu files.
#ifndef BACKPLANE_PLUGINS_CUDA_CUDA_STATE_HPP
#define BACKPLANE_PLUGINS_CUDA_CUDA_STATE_HPP

#include "cuda_driver.hpp"

#include <backplane/plugin.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

namespace backplane::cuda {

// One GPU as the driver numbers it (after CUDA_VISIBLE_DEVICES).
struct Device {
  int ordinal = 0;
  CUdevice handle = 0;
  std::string label;  // "cuda:0"
  std::string name;
  std::uint64_t memory_total = 0;
  std::vector<std::string> attribute_text;  // key, value, key, value, ...
  std::vector<BP_KeyValue> attributes;      // views into attribute_text

  std::mutex mutex;             // guards first use
  CUcontext context = nullptr;  // retained primary context, set on first use
  CUstream stream = nullptr;    // every operation on this device runs here
  // Whether the widening kernel runs here, asked on the first conversion
  // (guarded by mutex): empty when it does, else why not.
  bool widen_checked = false;
  std::string widen_unavailable;
};

}  // namespace backplane::cuda

// The ABI's opaque handles.
struct BP_Backend {
  std::mutex mutex;  // guards everything below
  bool probed = false;
  bool available = false;
  std::string reason;  // probe's answer, stable once probed
  const backplane::cuda::DriverApi* driver = nullptr;
  std::vector<std::unique_ptr<backplane::cuda::Device>> devices;
  std::unordered_set<BP_Buffer*> buffers;  // live handles, for validation
  std::unordered_set<BP_Event*> events;
  std::set<std::pair<int, int>> peer_pairs_tried;  // (destination, source) ordinals
};

struct BP_Buffer {
  backplane::cuda::Device* device = nullptr;
  BP_MemoryKind kind = BP_MEMORY_DEVICE;
  CUdeviceptr address = 0;  // device pointer, or the pinned host pointer (UVA)
  std::uint64_t size = 0;
  bool owned = true;  // false for memory_wrap: someone else frees the memory
};

struct BP_Event {
  backplane::cuda::Device* device = nullptr;
  CUevent event = nullptr;
  std::string operation;  // what completes, for event_wait's error message
};


namespace backplane::cuda {

// Makes the device's context current for one scope and restores the caller's.
class ContextScope {
 public:
  // Throws Failure when the context cannot be made current.
  ContextScope(const DriverApi& driver, const Device& device) : driver_(driver) {
    check(driver, driver.cuCtxPushCurrent(device.context), "cuCtxPushCurrent on " + device.label);
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

// Fills backend.available, reason and devices (cuda_probe.cu). Values, not
// exceptions: every outcome is a reason. Creates no context, reserves no
// memory, starts no thread. The caller holds backend.mutex.
void run_probe(BP_Backend& backend);

// Shared by cuda_backend.cu and cuda_memory.cu; each throws plugin::Failure.
// The live backend behind `handle` (INVALID_ARGUMENT naming `call` if none).
BP_Backend& backend_of(BP_Backend* handle, const char* call);
// The backend, probed and available, or UNAVAILABLE with the probe's reason.
BP_Backend& usable_backend(BP_Backend* handle, const char* call);
// Retains the device's primary context and creates its stream, once.
Device& start_device(BP_Backend& backend, std::int32_t ordinal, const char* call);
// Frees a buffer the backend no longer tracks (cuda_memory.cu).
void release_buffer(const DriverApi& driver, BP_Buffer* buffer);

}  // namespace backplane::cuda

#endif  // BACKPLANE_PLUGINS_CUDA_CUDA_STATE_HPP
