// The CPU backend: device memory is ordinary host memory. Written on the
// plugin SDK (backplane/plugin_sdk.hpp), which generates the ABI table,
// handle checks, range checks and error translation around this class.
//
// Offers (ABI 1.2): N devices "cpu:0".."cpu:N-1" sharing the host's memory
// (memory kind "host", ABI 1.4);
// device and pinned-host memory (both plain host memory aligned to
// kAlignment bytes; size 0 is valid); memory_wrap of any host memory; copies
// by memcpy/memmove. Async copies run inline and hand out completed events,
// hence no BP_CAPABILITY_ASYNC. No convert_integers: the core widens on the
// host, which is the same memory.
//
// Options (string values):
//   devices = N   strict integer 1..64, default 1 (for multi-device testing).
//
// Memory figures are the host's as this process can use it: capped by
// RLIMIT_AS and the cgroup's memory limit (plugin_sdk/host_memory.hpp). A failed
// allocation is BP_ERROR_OUT_OF_MEMORY with the size asked and those
// free/total figures.
#ifndef BACKPLANE_PLUGINS_CPU_CPU_BACKEND_HPP
#define BACKPLANE_PLUGINS_CPU_CPU_BACKEND_HPP

#include <dlpack/dlpack.h>
#include <backplane/plugin_sdk.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#ifndef BP_CPU_PLUGIN_VERSION
#define BP_CPU_PLUGIN_VERSION "unversioned"
#endif

namespace backplane::cpu {

namespace sdk = backplane::plugin_sdk;

// Every buffer's address is a multiple of this (a cache line; enough for AVX-512).
inline constexpr std::size_t kAlignment = 64;
inline constexpr std::int32_t kMaxDevices = 64;

class CpuBackend {
 public:
  static constexpr sdk::Identity kIdentity{
      .name = "cpu",
      .version = BP_CPU_PLUGIN_VERSION,
      .priority = 10,
      .capabilities = BP_CAPABILITY_HOST_ADDRESSABLE | BP_CAPABILITY_PINNED_HOST | BP_CAPABILITY_WRAP_MEMORY,
      .dlpack_device_type = kDLCPU,
  };

  struct Buffer : sdk::BufferBase {
    bool owned = true;  // false for memory_wrap: the caller's memory, never freed here
    ~Buffer();
  };
  struct Event {};  // never made: every copy has completed when it returns

  explicit CpuBackend(std::int32_t devices) : devices_(devices) {}
  static std::unique_ptr<CpuBackend> create(const sdk::Options& options);

  sdk::Probe probe();
  std::int32_t device_count() const { return devices_; }
  sdk::DeviceDescription describe(std::int32_t ordinal);
  sdk::MemoryFigures memory(std::int32_t ordinal);
  // Every device's memory is the host's (ABI 1.4).
  sdk::MemoryList memories(std::int32_t /*ordinal*/) const { return {{"host", "host memory"}}; }
  std::unique_ptr<Buffer> allocate(std::int32_t ordinal, BP_MemoryKind kind, std::uint64_t size);
  std::unique_ptr<Event> copy_to_device(Buffer& destination, std::uint64_t offset, const void* source,
                                        std::uint64_t size, sdk::Mode mode);
  std::unique_ptr<Event> copy_to_host(Buffer& source, std::uint64_t offset, void* destination, std::uint64_t size,
                                      sdk::Mode mode);
  std::unique_ptr<Event> copy_device_to_device(Buffer& source, std::uint64_t source_offset, Buffer& destination,
                                               std::uint64_t destination_offset, std::uint64_t size, sdk::Mode mode);
  std::unique_ptr<Buffer> wrap(std::int32_t ordinal, void* address, std::uint64_t size);
  void wait(Event&) {}
  bool query(Event&) { return true; }

 private:
  const std::int32_t devices_;
};

// The generated entries, for test fixtures that wrap the real backend.
using Entries = sdk::Entries<CpuBackend>;

}  // namespace backplane::cpu

#endif  // BACKPLANE_PLUGINS_CPU_CPU_BACKEND_HPP
