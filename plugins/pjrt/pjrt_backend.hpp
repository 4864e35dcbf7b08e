// The pjrt adapter: one backend plugin that drives any PJRT plugin library
// (a `GetPjrtApi` shared library from a JAX or XLA wheel) through
// pjrt_c_api.h alone. Written on the plugin SDK; docs/pjrt.md has the whole
// mapping, the PJRT versions handled and the pitfalls avoided.
//
// Options (string values):
//   library = PATH            the PJRT plugin library (required). The core
//                             gives /proc/self/fd/N, a descriptor of the file
//                             it judged; messages name where it leads.
//   create.<key> = TYPE:VALUE a PJRT_Client_Create option, TYPE one of int64,
//                             bool, float, string, int64_list (comma-separated):
//                             `create.cpu_device_count = int64:2`.
//   data_path = auto|host|copy
//                             host: buffers are the PJRT buffers' host memory,
//                             which the core reads and writes directly (only
//                             the cpu platform); copy: every byte moves
//                             through PJRT calls, as on a device the host
//                             cannot address (pjrt_buffers.hpp); auto (the
//                             default): host on the cpu platform, else copy.
//
// Probe: opens the library (pjrt_library.hpp), then PJRT_Client_Create with
// the create options and preallocate=false unless create.preallocate is
// given. This is the one client of the backend, kept until backend_destroy
// (a second Client_Create never happens), which is why the table declares
// BP_CAPABILITY_PROBE_IN_CHILD: the core probes in a child process, and in
// the caller the SDK runs this probe on the first device call. A library that
// cannot be used is failed with why (probe's error); a Client_Create error is
// unavailable with PJRT's message, code, version and identifying attributes
// ("No visible GPU devices. (FAILED_PRECONDITION, PJRT 0.116, cuda_version
// 12090)"), except INVALID_ARGUMENT (the create options were refused), which
// is failed. Priority: 5 for the cpu platform (below the cpu plugin's 10),
// 90 for any other (below the cuda plugin's 100).
//
// What the backend can do is stated after the probe (ABI 1.4): host path
// HOST_ADDRESSABLE, WRAP_MEMORY and DLPack kDLCPU; copy path ASYNC and
// NO_DEVICE_TO_DEVICE, DLPack type 0 (its memory has no stable address);
// both PINNED_HOST where every device has a pinned_host memory. The table
// declares what is true of both paths (PROBE_IN_CHILD, NO_DEVICE_TO_DEVICE,
// PINNED_HOST, WRAP_MEMORY) for a core that reads only the table.
//
// Fork: PJRT plugins do not survive fork(); in a child of the process that
// created the client every call is refused (refusal()) and nothing calls PJRT.
#ifndef BACKPLANE_PLUGINS_PJRT_PJRT_BACKEND_HPP
#define BACKPLANE_PLUGINS_PJRT_PJRT_BACKEND_HPP

#include "pjrt_buffers.hpp"

#include <backplane/plugin_sdk.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#ifndef BP_PJRT_PLUGIN_VERSION
#define BP_PJRT_PLUGIN_VERSION "unversioned"
#endif

namespace backplane::pjrt {

inline constexpr std::int32_t kCpuPlatformPriority = 5;  // below the cpu plugin (10)
inline constexpr std::int32_t kDevicePriority = 90;      // below the cuda plugin (100)

enum class DataPath { kAuto, kHost, kCopy };

class PjrtBackend {
 public:
  static constexpr sdk::Identity kIdentity{
      .name = "pjrt",
      .version = BP_PJRT_PLUGIN_VERSION,
      .priority = kCpuPlatformPriority,
      .capabilities = BP_CAPABILITY_PROBE_IN_CHILD | BP_CAPABILITY_NO_DEVICE_TO_DEVICE | BP_CAPABILITY_PINNED_HOST |
                      BP_CAPABILITY_WRAP_MEMORY,
      .dlpack_device_type = 0,
  };

  using Buffer = pjrt::Buffer;
  using Event = pjrt::Event;

  PjrtBackend(std::string backend, std::string library, std::vector<CreateOption> create_options, DataPath data_path)
      : backend_(std::move(backend)),
        library_path_(std::move(library)),
        library_name_(pjrt::library_name(library_path_)),
        create_options_(std::move(create_options)),
        data_path_(data_path) {}
  ~PjrtBackend();
  static std::unique_ptr<PjrtBackend> create(const sdk::Options& options);

  std::string_view refusal();
  sdk::Probe probe();
  BP_Capabilities capabilities();
  std::int32_t dlpack_device_type();
  std::int32_t device_count() const { return devices_.count(); }
  sdk::DeviceDescription describe(std::int32_t ordinal);
  sdk::MemoryList memories(std::int32_t ordinal);
  sdk::MemoryFigures memory(std::int32_t ordinal);
  std::unique_ptr<Buffer> allocate(std::int32_t ordinal, BP_MemoryKind kind, std::uint64_t size);
  std::unique_ptr<Buffer> wrap(std::int32_t ordinal, void* address, std::uint64_t size);
  std::unique_ptr<Event> copy_to_device(Buffer& destination, std::uint64_t offset, const void* source,
                                        std::uint64_t size, sdk::Mode mode);
  std::unique_ptr<Event> copy_to_host(Buffer& source, std::uint64_t offset, void* destination, std::uint64_t size,
                                      sdk::Mode mode);
  std::unique_ptr<Event> copy_device_to_device(Buffer& source, std::uint64_t source_offset, Buffer& destination,
                                               std::uint64_t destination_offset, std::uint64_t size, sdk::Mode mode);
  void wait(Event& event) { pjrt::wait(event); }
  bool query(Event& event) { return pjrt::ready(event); }

 private:
  bool host_path() const { return data_path_ == DataPath::kHost; }
  sdk::Probe probe_client();

  const std::string backend_;       // the instance's name (option backend), "pjrt" when not given
  const std::string library_path_;  // what is opened
  const std::string library_name_;  // what messages name (pjrt::library_name)
  const std::vector<CreateOption> create_options_;
  DataPath data_path_;                         // resolved from kAuto by probe
  const Library* library_ = nullptr;           // set by probe
  std::unique_ptr<Client> client_;             // set by an available probe
  std::optional<sdk::Failure> probe_failure_;  // a failed probe, answered again without a second try
  sdk::ForkGuard fork_;                        // noted once the client exists
  std::string refusal_text_;                   // written before fork_ is noted
  sdk::Devices<Device> devices_;
};

// The generated entries, for tests that drive the backend directly.
using Entries = sdk::Entries<PjrtBackend>;

}  // namespace backplane::pjrt

#endif  // BACKPLANE_PLUGINS_PJRT_PJRT_BACKEND_HPP
