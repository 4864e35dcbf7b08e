// Test-side helpers for talking to a plugin through the raw ABI: load the
// file, create backends from string options, turn BP_Error* into values (and
// destroy them), allocate buffers. Deliberately independent of
// plugin_support.hpp, which is for plugins.
#ifndef BACKPLANE_TESTS_CPU_PLUGIN_HARNESS_HPP
#define BACKPLANE_TESTS_CPU_PLUGIN_HARNESS_HPP

#include <backplane/plugin.h>
#include <doctest/doctest.h>

#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <dirent.h>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace backplane::test {

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

// What a call returned: code 0 and an empty message for success.
struct Outcome {
  BP_ErrorCode code = 0;
  std::string message;
  bool ok() const { return code == 0; }
};

// Reads and destroys `error`.
inline Outcome outcome(BP_Error* error) {
  if (error == nullptr) return {};
  Outcome result{error->code, std::string(error->message, error->message_size)};
  error->destroy(error);
  return result;
}

// Lets BP_CHECK_OK take both raw calls and the Backend helpers' outcomes.
inline Outcome outcome(Outcome already) { return already; }

#define BP_CHECK_OK(call)                         \
  do {                                            \
    const auto bp_outcome = ::backplane::test::outcome(call); \
    CHECK_MESSAGE(bp_outcome.ok(), bp_outcome.message); \
  } while (false)

#define BP_REQUIRE_OK(call)                       \
  do {                                            \
    const auto bp_outcome = ::backplane::test::outcome(call); \
    REQUIRE_MESSAGE(bp_outcome.ok(), bp_outcome.message); \
  } while (false)

using Options = std::vector<std::pair<std::string, std::string>>;

inline Outcome try_create(const BP_PluginApi& api, const Options& options, BP_Backend** backend) {
  std::vector<BP_KeyValue> pairs;
  for (const auto& [key, value] : options) {
    pairs.push_back({sizeof(BP_KeyValue), key.data(), key.size(), value.data(), value.size()});
  }
  BP_BackendCreateArgs args{sizeof(args), pairs.data(), pairs.size(), nullptr};
  Outcome result = outcome(api.backend_create(&args));
  *backend = args.backend;
  return result;
}

// One backend instance, destroyed at scope exit.
class Backend {
 public:
  Backend(const BP_PluginApi& api, const Options& options = {}) : api_(api) {
    const Outcome created = try_create(api, options, &handle_);
    REQUIRE_MESSAGE(created.ok(), created.message);
    REQUIRE(handle_ != nullptr);
  }
  ~Backend() { api_.backend_destroy(handle_); }
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;

  BP_Backend* handle() const { return handle_; }
  const BP_PluginApi& api() const { return api_; }

  Outcome allocate(std::uint64_t size, BP_Buffer** buffer, void** address = nullptr,
                   std::int32_t ordinal = 0, BP_MemoryKind kind = BP_MEMORY_DEVICE) const {
    BP_MemoryAllocateArgs args{sizeof(args), handle_, ordinal, kind, size, nullptr, nullptr};
    Outcome result = outcome(api_.memory_allocate(&args));
    *buffer = args.buffer;
    if (address != nullptr) *address = args.address;
    return result;
  }

  BP_Buffer* allocate_ok(std::uint64_t size, std::int32_t ordinal = 0,
                         BP_MemoryKind kind = BP_MEMORY_DEVICE) const {
    BP_Buffer* buffer = nullptr;
    const Outcome result = allocate(size, &buffer, nullptr, ordinal, kind);
    REQUIRE_MESSAGE(result.ok(), result.message);
    return buffer;
  }

  Outcome wrap(void* address, std::uint64_t size, BP_Buffer** buffer, std::int32_t ordinal = 0) const {
    BP_MemoryWrapArgs args{sizeof(args), handle_, ordinal, address, size, nullptr};
    Outcome result = outcome(api_.memory_wrap(&args));
    *buffer = args.buffer;
    return result;
  }

  Outcome free(BP_Buffer* buffer) const {
    BP_MemoryFreeArgs args{sizeof(args), handle_, buffer};
    return outcome(api_.memory_free(&args));
  }

  Outcome to_device(BP_Buffer* destination, std::uint64_t offset, const void* source, std::uint64_t size) const {
    BP_CopyToDeviceArgs args{sizeof(args), handle_, destination, offset, source, size, nullptr};
    return outcome(api_.copy_to_device(&args));
  }

  Outcome to_host(BP_Buffer* source, std::uint64_t offset, void* destination, std::uint64_t size) const {
    BP_CopyToHostArgs args{sizeof(args), handle_, source, offset, destination, size, nullptr};
    return outcome(api_.copy_to_host(&args));
  }

  Outcome device_to_device(BP_Buffer* source, std::uint64_t source_offset, BP_Buffer* destination,
                           std::uint64_t destination_offset, std::uint64_t size) const {
    BP_CopyDeviceToDeviceArgs args{sizeof(args), handle_, source, source_offset, destination,
                                   destination_offset, size, nullptr};
    return outcome(api_.copy_device_to_device(&args));
  }

  Outcome wait(BP_Event* event) const {
    BP_EventArgs args{sizeof(args), handle_, event, 0};
    return outcome(api_.event_wait(&args));
  }

  int query(BP_Event* event) const {
    BP_EventArgs args{sizeof(args), handle_, event, -1};
    const Outcome result = outcome(api_.event_query(&args));
    CHECK_MESSAGE(result.ok(), result.message);
    return args.done;
  }

  BP_DeviceInfoArgs info(std::int32_t ordinal, Outcome* result = nullptr) const {
    BP_DeviceInfoArgs args{};
    args.struct_size = sizeof(args);
    args.backend = handle_;
    args.ordinal = ordinal;
    Outcome got = outcome(api_.device_info(&args));
    if (result != nullptr) {
      *result = std::move(got);
    } else {
      CHECK_MESSAGE(got.ok(), got.message);
    }
    return args;
  }

  std::int32_t device_count() const {
    BP_DeviceCountArgs args{sizeof(args), handle_, -1};
    BP_CHECK_OK(api_.device_count(&args));
    return args.count;
  }

 private:
  const BP_PluginApi& api_;
  BP_Backend* handle_ = nullptr;
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

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace backplane::test

#endif  // BACKPLANE_TESTS_CPU_PLUGIN_HARNESS_HPP
