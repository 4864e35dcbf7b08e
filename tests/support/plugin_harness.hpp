// Test-side helpers for driving a plugin directly: load the file, and a
// backend over the core's PluginClient (abi/plugin_client.hpp), so the tests
// see a plugin's errors as the core does. Deliberately independent of
// plugin_support.hpp, which is for plugins.
#ifndef BACKPLANE_TESTS_CPU_PLUGIN_HARNESS_HPP
#define BACKPLANE_TESTS_CPU_PLUGIN_HARNESS_HPP

#include "abi/plugin_client.hpp"
#include "support/errors.hpp"

#include <backplane/plugin.h>
#include <doctest/doctest.h>

#include <dlfcn.h>

#include <dirent.h>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace backplane::testing {

// A plugin file loaded once per process and never unloaded.
inline const BP_PluginApi& load_plugin(const char* path) {
  void* library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  REQUIRE_MESSAGE(library != nullptr, "dlopen ", path, ": ", dlerror());
  auto entry = reinterpret_cast<BP_PluginEntryFn>(dlsym(library, BP_PLUGIN_ENTRY_SYMBOL));
  REQUIRE_MESSAGE((entry != nullptr), path, " has no ", BP_PLUGIN_ENTRY_SYMBOL);
  static const std::uint32_t kMajors[] = {BP_ABI_MAJOR};
  const BP_PluginEntryArgs offer{sizeof(BP_PluginEntryArgs), kMajors, 1, BP_ABI_MINOR};
  const BP_PluginApi* api = entry(&offer);
  REQUIRE(api != nullptr);
  return *api;
}

using detail::PluginClient;
using detail::PluginStatus;
using ErrorCode = backplane::ErrorCode;

// Reads and destroys `error`.
inline PluginStatus status_of(BP_Error* error) { return PluginStatus(error); }

// Lets BP_CHECK_OK take both raw calls and the Backend helpers' statuses.
inline PluginStatus status_of(PluginStatus already) { return already; }

#define BP_CHECK_OK(call)                                         \
  do {                                                            \
    const auto bp_status = ::backplane::testing::status_of(call); \
    CHECK_MESSAGE(bp_status.ok(), bp_status.message());           \
  } while (false)

#define BP_REQUIRE_OK(call)                                       \
  do {                                                            \
    const auto bp_status = ::backplane::testing::status_of(call); \
    REQUIRE_MESSAGE(bp_status.ok(), bp_status.message());         \
  } while (false)

using Options = std::vector<std::pair<std::string, std::string>>;

inline PluginStatus try_create(const BP_PluginApi& api, const Options& options, BP_Backend** backend) {
  auto created = PluginClient::create(api, options);
  *backend = created.ok() ? *created : nullptr;
  return created.status();
}

// One backend instance, destroyed at scope exit. Out-parameters are set
// whatever the call returned, so a test can check a failed call left them
// NULL.
class Backend {
 public:
  Backend(const BP_PluginApi& api, const Options& options = {}) : client_(api, nullptr) {
    BP_Backend* handle = nullptr;
    const PluginStatus created = try_create(api, options, &handle);
    REQUIRE_MESSAGE(created.ok(), created.message());
    REQUIRE(handle != nullptr);
    client_ = PluginClient(api, handle);
  }
  ~Backend() {
    if (client_.backend() != nullptr) client_.backend_destroy();
  }
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;

  BP_Backend* handle() const { return client_.backend(); }
  const BP_PluginApi& api() const { return client_.api(); }
  const PluginClient& client() const { return client_; }

  PluginStatus allocate(std::uint64_t size, BP_Buffer** buffer, void** address = nullptr, std::int32_t ordinal = 0,
                        BP_MemoryKind kind = BP_MEMORY_DEVICE) const {
    auto allocated = client_.memory_allocate(ordinal, kind, size);
    *buffer = allocated.ok() ? allocated->buffer : nullptr;
    if (address != nullptr) *address = allocated.ok() ? allocated->address : nullptr;
    return allocated.status();
  }

  BP_Buffer* allocate_ok(std::uint64_t size, std::int32_t ordinal = 0, BP_MemoryKind kind = BP_MEMORY_DEVICE) const {
    BP_Buffer* buffer = nullptr;
    const PluginStatus result = allocate(size, &buffer, nullptr, ordinal, kind);
    REQUIRE_MESSAGE(result.ok(), result.message());
    return buffer;
  }

  PluginStatus wrap(void* address, std::uint64_t size, BP_Buffer** buffer, std::int32_t ordinal = 0) const {
    auto wrapped = client_.memory_wrap(ordinal, address, size);
    *buffer = wrapped.ok() ? *wrapped : nullptr;
    return wrapped.status();
  }

  PluginStatus free(BP_Buffer* buffer) const { return client_.memory_free(buffer); }

  PluginStatus to_device(BP_Buffer* destination, std::uint64_t offset, const void* source, std::uint64_t size) const {
    return client_.copy_to_device(destination, offset, source, size);
  }

  PluginStatus to_host(BP_Buffer* source, std::uint64_t offset, void* destination, std::uint64_t size) const {
    return client_.copy_to_host(source, offset, destination, size);
  }

  PluginStatus device_to_device(BP_Buffer* source, std::uint64_t source_offset, BP_Buffer* destination,
                                std::uint64_t destination_offset, std::uint64_t size) const {
    return client_.copy_device_to_device(source, source_offset, destination, destination_offset, size);
  }

  PluginStatus wait(BP_Event* event) const { return client_.event_wait(event); }

  // The done flag; -1 when the plugin left it unset.
  int query(BP_Event* event) const {
    auto args = detail::event_args(handle(), event);
    args.done = -1;
    const PluginStatus result = status_of(api().event_query(&args));
    CHECK_MESSAGE(result.ok(), result.message());
    return args.done;
  }

  BP_DeviceInfoArgs info(std::int32_t ordinal, PluginStatus* result = nullptr) const {
    auto args = detail::device_info_args(handle(), ordinal);
    PluginStatus got = status_of(api().device_info(&args));
    if (result != nullptr) {
      *result = std::move(got);
    } else {
      CHECK_MESSAGE(got.ok(), got.message());
    }
    return args;
  }

  std::int32_t device_count() const {
    auto args = detail::device_count_args(handle());
    args.count = -1;
    BP_CHECK_OK(api().device_count(&args));
    return args.count;
  }

 private:
  PluginClient client_;
};

// `size` random bytes, none zero, so a copy that never happened cannot pass
// against zero-filled memory.
inline std::vector<unsigned char> random_bytes(std::size_t size, std::uint64_t seed) {
  std::mt19937_64 generator(seed);
  std::uniform_int_distribution<int> byte(1, 255);
  std::vector<unsigned char> bytes(size);
  for (auto& value : bytes) value = static_cast<unsigned char>(byte(generator));
  return bytes;
}

// Names of the dynamic symbols a shared object defines (nm -D --defined-only).
inline std::vector<std::string> exported_symbols(const std::string& path) {
  std::vector<std::string> names;
  const std::string command = "nm -D --defined-only '" + path + "' 2>&1";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), pclose);
  REQUIRE(pipe != nullptr);
  char line[512];
  while (std::fgets(line, sizeof(line), pipe.get()) != nullptr) {
    std::string text(line);
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
    const auto space = text.rfind(' ');
    if (!text.empty()) names.push_back(space == std::string::npos ? text : text.substr(space + 1));
  }
  return names;
}

// Threads of this process, from /proc/self/task.
inline int thread_count() {
  int count = 0;
  if (DIR* tasks = opendir("/proc/self/task")) {
    while (const dirent* entry = readdir(tasks)) {
      if (entry->d_name[0] != '.') ++count;
    }
    closedir(tasks);
  }
  return count;
}

// thread_count() once it is `expected`, or after 5 s whatever it is then. A
// joined thread can still be listed for a moment after pthread_join returns:
// the kernel wakes the joiner before it removes the exiting task.
inline int thread_count_settled_at(int expected) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  int count = thread_count();
  while (count != expected && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    count = thread_count();
  }
  return count;
}

}  // namespace backplane::testing

#endif  // BACKPLANE_TESTS_CPU_PLUGIN_HARNESS_HPP
