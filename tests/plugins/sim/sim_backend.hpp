// The simulated accelerator: a test-only backend that behaves like a discrete
// device without needing one, so the core's placement, staging and error paths
// can be exercised on any machine.
//
// Written on the plugin SDK (backplane/plugin_sdk.hpp), which generates the
// ABI table, handle checks, range checks and error translation around
// SimBackend. Offers (ABI 1.2):
//   backend_create/destroy, probe, device_count, device_info (kind
//     ACCELERATOR, memory_free = memory_limit - bytes in use),
//   memory_allocate/free: BP_MEMORY_DEVICE is a separate host allocation
//     reachable only through the ABI copies (address out is a device address
//     the core must not dereference, as with CUDA);
//     BP_MEMORY_PINNED_HOST is ordinary 64-byte aligned host memory (address
//     out is its host pointer),
//   the three sync copies, and the three async copies, which run in order on
//     one copy engine (a worker thread) per device, the destination's (a copy
//     to the host: the source's), started on the first async call to it and
//     joined by backend_destroy, so BP_CAPABILITY_ASYNC is set; the devices'
//     engines run at once, as a GPU's own copy engines do, and a copy
//     between two devices also waits for what was queued before it on the
//     source's engine, so each copy runs after every earlier one of either
//     device,
//   event_wait (returns the copy's error), event_query, event_destroy
//     (waits for the copy),
//   memory_wrap: an address inside a live device allocation of that device
//     (anything else is INVALID_ARGUMENT, a range past its end OUT_OF_RANGE);
//     the handle does not keep the memory alive, and memory_free on it waits
//     for every queued copy, as a device would have to.
// Not implemented: convert_integers (NULL; capability absent), host access to
// device memory (no BP_CAPABILITY_HOST_ADDRESSABLE).
//
// Options (string values, strict unsigned decimal integers):
//   devices        1..64, default 1: devices "sim:0".."sim:N-1".
//   memory_limit   bytes per device, default 1073741824 (1 GiB); a device
//                  allocation beyond what is left fails with
//                  BP_ERROR_OUT_OF_MEMORY naming the size asked and free/total.
//   fail_alloc_at  N >= 1: the Nth memory_allocate call of the backend (either
//                  kind, counting calls that pass argument checks) fails with
//                  BP_ERROR_OUT_OF_MEMORY. 0 (default): never.
//   fail_copy_at   N >= 1: the Nth copy of the backend (sync or async, any
//                  direction, counting copies that pass argument and range
//                  checks) fails with BP_ERROR_DEVICE and moves no data; for an
//                  async copy the error comes from event_wait, not from the
//                  submission. 0 (default): never.
//   copy_delay_us  0..60000000: each async copy sleeps this long on the worker
//                  before moving data, so overlap is observable. Default 0.
//   copy_bytes_per_second  0..2^63, default 0 (no cap): each device's copy
//                  engine moves at most this many bytes a second, as a link
//                  of that bandwidth would (a token bucket per engine, which
//                  sync copies to or from that device also draw on). The
//                  bench of many devices measures the sum against N x cap.
//   probe_priority 0..1000: the priority probe reports (ABI 1.2), in place of
//                  the table's 50. Default: the table's.
//   report_free    0 or 1, default 1. 0: device_info answers memory_free
//                  BP_MEMORY_FREE_UNKNOWN, as a backend with no query does.
//   no_device_to_device  0 or 1, default 0. 1: the probe states
//                  BP_CAPABILITY_NO_DEVICE_TO_DEVICE (ABI 1.4) and both
//                  device-to-device copies fail with BP_ERROR_UNSUPPORTED, as
//                  a backend without byte-range copies between its buffers
//                  (PJRT) would have the core never call them.
//   stated_dlpack_device_type  -1000..1000: the DLPack device type the probe
//                  states (ABI 1.4) in place of the table's, right or wrong.
//
// DLPack: the table declares BACKPLANE_SIM_DLPACK_DEVICE_TYPE (a build
// define; 12, kDLExtDev, unless the build says otherwise), so DLPack export
// and import of device memory run on any machine without the core knowing
// the backend by name.
//
// Thread-safety: every call may come from any thread at once.
#ifndef BACKPLANE_TESTS_PLUGINS_SIM_SIM_BACKEND_HPP
#define BACKPLANE_TESTS_PLUGINS_SIM_SIM_BACKEND_HPP

#include "copy_worker.hpp"

#include <backplane/plugin_sdk.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#ifndef BACKPLANE_SIM_DLPACK_DEVICE_TYPE
#define BACKPLANE_SIM_DLPACK_DEVICE_TYPE 12
#endif

namespace backplane::sim {

namespace sdk = backplane::plugin_sdk;

class SimBackend {
 public:
  static constexpr sdk::Identity kIdentity{
      .name = "sim",
      .version = "test-only",
      .priority = 50,
      .capabilities = BP_CAPABILITY_PINNED_HOST | BP_CAPABILITY_ASYNC | BP_CAPABILITY_WRAP_MEMORY,
      .dlpack_device_type = BACKPLANE_SIM_DLPACK_DEVICE_TYPE,
  };

  struct Options {
    std::int32_t devices = 1;
    std::uint64_t memory_limit = std::uint64_t{1} << 30;
    std::uint64_t fail_alloc_at = 0;  // 0: never
    std::uint64_t fail_copy_at = 0;   // 0: never
    std::uint64_t copy_delay_us = 0;
    std::uint64_t copy_bytes_per_second = 0;  // 0: no cap
    std::optional<std::int32_t> priority;     // what probe reports; unset: kIdentity's
    bool report_free = true;
    bool no_device_to_device = false;
    std::optional<std::int32_t> dlpack_device_type;  // what probe states; unset: kIdentity's
  };

  // Storage is shared so a buffer freed while an async copy still reads or
  // writes it stays alive until that copy is done. `address` is the storage.
  struct Buffer : sdk::BufferBase {
    SimBackend* backend = nullptr;
    std::shared_ptr<std::byte> storage;
    bool wrapped = false;  // memory_wrap: a view into another allocation, not counted in use
    ~Buffer();
  };

  // An async copy's outcome, written once by the worker.
  struct Completion {
    bool done = false;
    BP_ErrorCode code = 0;  // 0: succeeded
    std::string message;
  };
  struct Event {
    SimBackend* backend = nullptr;
    std::shared_ptr<Completion> completion;
    ~Event();  // waits for the copy
  };

  explicit SimBackend(const Options& options);
  ~SimBackend();
  SimBackend(const SimBackend&) = delete;
  SimBackend& operator=(const SimBackend&) = delete;
  static std::unique_ptr<SimBackend> create(const sdk::Options& options);

  sdk::Probe probe();
  // What the probe states (ABI 1.4): the table's, or as the options say.
  BP_Capabilities capabilities() const {
    return kIdentity.capabilities | (options_.no_device_to_device ? BP_CAPABILITY_NO_DEVICE_TO_DEVICE : 0);
  }
  std::int32_t dlpack_device_type() const { return options_.dlpack_device_type.value_or(kIdentity.dlpack_device_type); }
  std::int32_t device_count() const { return options_.devices; }
  sdk::DeviceDescription describe(std::int32_t ordinal);
  sdk::MemoryFigures memory(std::int32_t ordinal);
  std::unique_ptr<Buffer> allocate(std::int32_t ordinal, BP_MemoryKind kind, std::uint64_t size);
  std::unique_ptr<Event> copy_to_device(Buffer& destination, std::uint64_t offset, const void* source,
                                        std::uint64_t size, sdk::Mode mode);
  std::unique_ptr<Event> copy_to_host(Buffer& source, std::uint64_t offset, void* destination, std::uint64_t size,
                                      sdk::Mode mode);
  std::unique_ptr<Event> copy_device_to_device(Buffer& source, std::uint64_t source_offset, Buffer& destination,
                                               std::uint64_t destination_offset, std::uint64_t size, sdk::Mode mode);
  std::unique_ptr<Buffer> wrap(std::int32_t ordinal, void* address, std::uint64_t size);
  void wait(Event& event);
  bool query(Event& event);

 private:
  struct Transfer;
  // Runs `transfer` on device `engine`'s copy engine (async) or here (sync);
  // an async one runs after the work queued before it on `also_after`'s
  // engine too (a copy between two devices).
  std::unique_ptr<Event> run(Transfer transfer, std::int32_t engine, sdk::Mode mode, std::int32_t also_after);
  // Holds the caller until `engine` may have moved `size` more bytes at the
  // capped bandwidth (at once without a cap).
  void throttle(std::int32_t engine, std::uint64_t size);
  void complete(Completion& completion, const Transfer& transfer) noexcept;  // on the worker
  void wait_until_done(const Completion& completion);

  // A live device allocation, for memory_wrap to find.
  struct Allocation {
    std::uint64_t size = 0;
    std::int32_t ordinal = 0;
  };

  const Options options_;
  std::atomic<std::uint64_t> allocations_made_{0};
  std::atomic<std::uint64_t> copies_{0};

  std::mutex mutex_;  // guards in_use_, allocations_ and every Completion
  std::condition_variable completed_;
  std::vector<std::uint64_t> in_use_;                 // device bytes allocated, per ordinal
  std::map<std::uintptr_t, Allocation> allocations_;  // by start address

  // When each device's engine is next free at the capped bandwidth.
  std::mutex throttle_mutex_;
  std::vector<std::chrono::steady_clock::time_point> engine_free_at_;
  // One copy engine per device. Last: stopped (and joined) before the
  // members above go.
  std::vector<std::unique_ptr<CopyWorker>> workers_;
  void drain_all() {
    for (const auto& worker : workers_) worker->drain();
  }
};

}  // namespace backplane::sim

#endif  // BACKPLANE_TESTS_PLUGINS_SIM_SIM_BACKEND_HPP
