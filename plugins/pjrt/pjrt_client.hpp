// A PJRT client and what the adapter knows of its devices: the create
// options (`create.<key> = <type>:<value>` in the backend's options), one
// PJRT_Client_Create, the platform, the addressable devices with their
// descriptions and memories, and memory figures.
#ifndef BACKPLANE_PLUGINS_PJRT_PJRT_CLIENT_HPP
#define BACKPLANE_PLUGINS_PJRT_PJRT_CLIENT_HPP

#include "pjrt_library.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace backplane::pjrt {

// The prefix of the backend options that become PJRT create options.
inline constexpr std::string_view kCreatePrefix = "create.";

// One PJRT create option, parsed from `create.<name>` = `<type>:<value>`.
struct CreateOption {
  std::string name;
  PJRT_NamedValue_Type type = PJRT_NamedValue_kString;
  std::string text;                // kString
  std::int64_t integer = 0;        // kInt64
  std::vector<std::int64_t> list;  // kInt64List
  float real = 0;                  // kFloat
  bool boolean = false;            // kBool
};

// `key` is the whole option name ("create.cpu_device_count"), `value` its
// text ("int64:2"). Types: int64, bool (true/false), float, string,
// int64_list (comma-separated, possibly empty). Throws sdk::Failure
// (INVALID_ARGUMENT) naming the key and what was expected.
CreateOption parse_create_option(std::string_view key, std::string_view value);

// What the adapter itself passes: preallocate=false, unless the user gave
// create.preallocate (docs/pjrt.md).
inline constexpr std::string_view kPreallocate = "preallocate";

struct Memory {
  PJRT_Memory* memory = nullptr;
  std::string kind;         // Memory_Kind: "device", "pinned_host", "unpinned_host", ...
  std::string description;  // Memory_DebugString
};

struct Device : sdk::DeviceBase {
  PJRT_Device* device = nullptr;
  std::string name;  // DeviceDescription_ToString, after DeviceDescription_Kind where that is not the platform
  BP_DeviceKind kind = BP_DEVICE_KIND_ACCELERATOR;
  TextPairs attributes;
  std::vector<Memory> memories;          // the default first
  PJRT_Memory* device_memory = nullptr;  // kind "device", else the default memory
  PJRT_Memory* pinned_memory = nullptr;  // kind "pinned_host"; NULL when the device has none
  std::uint64_t memory_total = 0;        // set by the backend's probe
  std::string memory_source;             // where memory_total comes from, in words
};

class Client {
 public:
  // PJRT_Client_Create with `options`, adding preallocate=false unless the
  // options name preallocate; a library that refuses that option
  // (INVALID_ARGUMENT naming it) is asked once more without it. The client,
  // or what PJRT answered.
  static std::variant<std::unique_ptr<Client>, PjrtFailure> create(const Library& library,
                                                                   const std::vector<CreateOption>& options);
  Client(const Library& library, PJRT_Client* client);
  ~Client();  // PJRT_Client_Destroy, except in a forked child (fork())
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  PJRT_Client* get() const { return client_; }
  const Library& library() const { return library_; }
  const std::string& platform() const { return platform_; }
  const std::string& platform_version() const { return platform_version_; }
  // The addressable devices, ordinal = index in Client_AddressableDevices.
  std::vector<std::unique_ptr<Device>> devices(std::string_view backend) const;
  // Device_MemoryStats: bytes_limit and bytes_in_use, or nullopt when the
  // plugin does not answer (UNIMPLEMENTED on the CPU plugins) or gives no limit.
  struct Stats {
    std::uint64_t limit = 0;
    std::uint64_t in_use = 0;
  };
  std::optional<Stats> memory_stats(PJRT_Device* device) const;

  // The process that created the client; a child must not use it.
  bool forked() const noexcept { return fork_.forked(); }
  std::string forked_message() const;

 private:
  void read_platform();

  const Library& library_;
  PJRT_Client* client_;
  std::string platform_;
  std::string platform_version_;
  sdk::ForkGuard fork_;
};

// BP_DEVICE_KIND_CPU for "cpu", GPU for "cuda", "rocm" and "gpu", else ACCELERATOR.
BP_DeviceKind kind_of_platform(std::string_view platform);

}  // namespace backplane::pjrt

#endif  // BACKPLANE_PLUGINS_PJRT_PJRT_CLIENT_HPP
