// The CUDA backend: NVIDIA GPUs as backplane devices, written on the plugin
// SDK (backplane/plugin_sdk.hpp), which generates the ABI table, handle,
// argument and range checks and error translation around this class.
//
// Offers (ABI 1.3):
//   probe            driver and devices, through libcuda.so.1 opened at run time;
//                    no context, no device memory, no threads
//   devices          name, memory total/free, attributes compute_capability,
//                    multiprocessor_count, pci_bus_id, uuid
//   memory           device memory; pinned host memory (BP_MEMORY_PINNED_HOST);
//                    memory_wrap adopts device memory another library
//                    allocated (checked with cuPointerGetAttribute; work on
//                    it is ordered after the legacy default stream)
//   copies           host<->device and device<->device (peer between GPUs where
//                    the driver allows it, staged by the driver otherwise), each
//                    sync and async; events are completion handles
//   convert_integers widening of unsigned integers by a device kernel; where
//                    the kernel cannot run (no code for this GPU, a driver the
//                    CUDA runtime cannot use) BP_ERROR_UNSUPPORTED saying why,
//                    so the caller widens on the host
//   DLPack           kDLCUDA
//   device time      (ABI 1.3) a timed async copy or conversion is bracketed
//                    by two timing events; event_timing places them on the
//                    host's clock through a reference event whose host time
//                    is known (TimingReference). Untimed work keeps
//                    CU_EVENT_DISABLE_TIMING events, which cost less.
//
// Ordering: every operation on a device runs on that device's one stream, so
// operations on one device complete in submission order (a conversion queued
// after an async upload sees the uploaded data). A device-to-device copy runs
// on the destination's stream after the work already queued on the source's.
//
// Contexts: a device's primary context is retained on its first use (an
// allocation or copy) and released by backend_destroy; the process keeps one
// more reference until exit (the static CUDA runtime's module lives in it).
// Every hook pushes the context and pops it before returning, so the caller's
// current context is left as it was.
//
// Fork: a CUDA context does not survive fork(). In a child of the process
// that initialised the driver, probe answers unavailable and every call that
// would reach the driver fails UNAVAILABLE saying so (refusal()); destroying
// frees only the bookkeeping.
//
// Errors: CUDA failures carry what was being done, the CUDA error name and
// text, e.g. "cuMemAlloc of 19.09 GiB on cuda:0 failed:
// CUDA_ERROR_OUT_OF_MEMORY: out of memory (free 3.20 GiB of 24.00 GiB)".
//
// No options. Thread-safety: every call may come from any thread, at once.
//
// This header includes no CUDA header (plugin.cpp is host C++); the hooks
// live in the .cu files.
#ifndef BACKPLANE_PLUGINS_CUDA_CUDA_BACKEND_HPP
#define BACKPLANE_PLUGINS_CUDA_CUDA_BACKEND_HPP

#include <dlpack/dlpack.h>
#include <backplane/plugin_sdk.hpp>

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#ifndef BP_CUDA_PLUGIN_VERSION
#define BP_CUDA_PLUGIN_VERSION "unversioned"
#endif

struct CUevent_st;  // cuda.h's CUevent is a CUevent_st*

namespace backplane::cuda {

namespace sdk = backplane::plugin_sdk;

struct Device;           // cuda_state.hpp
struct DriverApi;        // cuda_driver.hpp
struct TimingReference;  // cuda_state.hpp

// What a copy or conversion does, for its messages and its event's: the
// numbers, formatted into text only when a message is needed (a failure),
// never on the success path.
struct Operation {
  const char* call = "";  // the ABI call without _async: "copy_to_device", "convert_integers"
  sdk::Mode mode = sdk::Mode::kBlocking;
  std::uint64_t amount = 0;  // bytes; elements for a conversion
  const Device* from = nullptr;
  const Device* to = nullptr;                  // the device a conversion runs on
  BP_IntegerType source_type = BP_INTEGER_U8;  // conversions only
  BP_IntegerType destination_type = BP_INTEGER_U8;

  // "copy_to_device_async of 4.00 MiB to cuda:0", "convert_integers of 10 U8
  // to U16 on cuda:0" (cuda_backend.cu).
  std::string text() const;
};

class CudaBackend {
 public:
  static constexpr sdk::Identity kIdentity{
      .name = "cuda",
      .version = BP_CUDA_PLUGIN_VERSION,
      .priority = 100,  // GPUs above the CPU's 10
      .capabilities = BP_CAPABILITY_PINNED_HOST | BP_CAPABILITY_ASYNC | BP_CAPABILITY_CONVERT_INTEGERS |
                      BP_CAPABILITY_WRAP_MEMORY | BP_CAPABILITY_EVENT_TIMING,
      .dlpack_device_type = kDLCUDA,
  };

  // `address` is the device pointer, or the pinned host pointer (which is
  // also its device pointer under unified addressing).
  struct Buffer : sdk::BufferBase {
    CudaBackend* backend = nullptr;
    Device* device = nullptr;
    bool owned = true;  // false for memory_wrap: someone else frees the memory
    ~Buffer();          // frees what release() has not
  };

  struct Event {
    const DriverApi* driver = nullptr;
    CUevent_st* event = nullptr;
    Operation operation;  // what completes, for event_wait's message
    // Timed work only: an event recorded before it, and the reference that
    // places both on the host's clock.
    CUevent_st* start = nullptr;
    std::shared_ptr<TimingReference> reference;
    ~Event();  // waits for the work, then releases
  };

  CudaBackend();
  ~CudaBackend();
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;
  static std::unique_ptr<CudaBackend> create(const sdk::Options& options);

  std::string_view refusal();
  sdk::Probe probe();
  std::int32_t device_count();
  sdk::DeviceDescription describe(std::int32_t ordinal);
  sdk::MemoryFigures memory(std::int32_t ordinal);
  // Device memory, the default, and page-locked host memory (ABI 1.4).
  sdk::MemoryList memories(std::int32_t /*ordinal*/) const {
    return {{"device", "GPU memory"}, {"pinned_host", "page-locked host memory (cuMemHostAlloc)"}};
  }
  std::unique_ptr<Buffer> allocate(std::int32_t ordinal, BP_MemoryKind kind, std::uint64_t size);
  std::unique_ptr<Event> copy_to_device(Buffer& destination, std::uint64_t offset, const void* source,
                                        std::uint64_t size, sdk::Mode mode);
  std::unique_ptr<Event> copy_to_host(Buffer& source, std::uint64_t offset, void* destination, std::uint64_t size,
                                      sdk::Mode mode);
  std::unique_ptr<Event> copy_device_to_device(Buffer& source, std::uint64_t source_offset, Buffer& destination,
                                               std::uint64_t destination_offset, std::uint64_t size, sdk::Mode mode);
  std::unique_ptr<Buffer> wrap(std::int32_t ordinal, void* address, std::uint64_t size);
  void release(Buffer& buffer);
  std::unique_ptr<Event> convert_integers(Buffer& source, std::uint64_t source_offset, BP_IntegerType source_type,
                                          Buffer& destination, std::uint64_t destination_offset,
                                          BP_IntegerType destination_type, std::uint64_t count);
  void wait(Event& event);
  bool query(Event& event);
  std::optional<sdk::DeviceSpan> timing(Event& event);

 private:
  // The device, started: its primary context retained and its stream made.
  Device& start_device(std::int32_t ordinal);
  // Waits for the work queued on every started device.
  void wait_for_every_device();
  // Lets `destination` read `source`'s memory directly where the hardware
  // allows it; otherwise cuMemcpyPeerAsync stages through the host.
  void try_enable_peer_access(Device& destination, Device& source);

  const DriverApi* driver_ = nullptr;  // set by an available probe
  sdk::Devices<Device> devices_;
  std::mutex peer_mutex_;
  std::set<std::pair<int, int>> peer_pairs_tried_;  // (destination, source) ordinals
};

}  // namespace backplane::cuda

#endif  // BACKPLANE_PLUGINS_CUDA_CUDA_BACKEND_HPP
