// The SDK's optional hooks refusal() and release(), and availability checked
// before buffer handles, for a backend whose memory hooks are defined out of
// line.
#include <backplane/plugin_sdk.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace {

namespace sdk = backplane::plugin_sdk;

std::atomic<bool> g_refuse{false};
std::atomic<bool> g_fail_release{false};
std::atomic<int> g_hook_calls{0};
std::atomic<int> g_releases{0};
std::atomic<int> g_live_buffers{0};

class GuardedBackend {
 public:
  static constexpr sdk::Identity kIdentity{.name = "guarded", .version = "test", .capabilities = BP_CAPABILITY_ASYNC};
  struct Buffer : sdk::BufferBase {
    std::vector<std::byte> bytes;
    Buffer() { ++g_live_buffers; }
    ~Buffer() { --g_live_buffers; }
  };
  struct Event {};

  static std::unique_ptr<GuardedBackend> create(const sdk::Options& options) {
    options.allow_only({"available"});
    auto backend = std::make_unique<GuardedBackend>();
    backend->available_ = options.integer("available", 1, 0, 1) == 1;
    return backend;
  }
  std::string_view refusal() { return g_refuse ? "this process was forked" : ""; }
  sdk::Probe probe() { return {available_, available_ ? "one device" : "switched off", {}}; }
  std::int32_t device_count() { return 1; }
  sdk::DeviceDescription describe(std::int32_t) { return {"Guarded", BP_DEVICE_KIND_ACCELERATOR, {}}; }
  sdk::MemoryFigures memory(std::int32_t) { return {64, 64}; }
  std::unique_ptr<Buffer> allocate(std::int32_t ordinal, BP_MemoryKind kind, std::uint64_t size);
  std::unique_ptr<Event> copy_to_device(Buffer& destination, std::uint64_t offset, const void* source,
                                        std::uint64_t size, sdk::Mode mode);
  std::unique_ptr<Event> copy_to_host(Buffer& source, std::uint64_t offset, void* destination, std::uint64_t size,
                                      sdk::Mode mode);
  std::unique_ptr<Event> copy_device_to_device(Buffer& source, std::uint64_t source_offset, Buffer& destination,
                                               std::uint64_t destination_offset, std::uint64_t size, sdk::Mode mode);
  void release(Buffer&) {
    ++g_releases;
    if (g_fail_release) throw sdk::Failure(BP_ERROR_DEVICE, "guarded: the device lost the buffer");
  }
  void wait(Event&) {}
  bool query(Event&) { return true; }

 private:
  bool available_ = true;
};

std::unique_ptr<GuardedBackend::Buffer> GuardedBackend::allocate(std::int32_t ordinal, BP_MemoryKind kind,
                                                                 std::uint64_t size) {
  ++g_hook_calls;
  auto buffer = std::make_unique<Buffer>();
  buffer->ordinal = ordinal;
  buffer->kind = kind;
  buffer->size = size;
  buffer->bytes.resize(size);
  return buffer;
}

std::unique_ptr<GuardedBackend::Event> GuardedBackend::copy_to_device(Buffer&, std::uint64_t, const void*,
                                                                      std::uint64_t, sdk::Mode) {
  ++g_hook_calls;
  return nullptr;
}

std::unique_ptr<GuardedBackend::Event> GuardedBackend::copy_to_host(Buffer&, std::uint64_t, void*, std::uint64_t,
                                                                    sdk::Mode) {
  ++g_hook_calls;
  return nullptr;
}

std::unique_ptr<GuardedBackend::Event> GuardedBackend::copy_device_to_device(Buffer&, std::uint64_t, Buffer&,
                                                                             std::uint64_t, std::uint64_t, sdk::Mode) {
  ++g_hook_calls;
  return nullptr;
}

const BP_PluginApi& api() { return *sdk::table<GuardedBackend>(); }

std::string take_message(BP_Error* error, BP_ErrorCode* code = nullptr) {
  if (error == nullptr) return "";
  std::string message(error->message, error->message_size);
  if (code != nullptr) *code = error->code;
  error->destroy(error);
  return message;
}

BP_Backend* create(bool available = true) {
  const BP_KeyValue option{sizeof(BP_KeyValue), "available", 9, available ? "1" : "0", 1};
  BP_BackendCreateArgs args{sizeof(args), &option, 1, nullptr};
  REQUIRE(take_message(api().backend_create(&args)).empty());
  return args.backend;
}

BP_Buffer* allocate(BP_Backend* backend, std::uint64_t size, std::string* error = nullptr,
                    BP_ErrorCode* code = nullptr) {
  BP_MemoryAllocateArgs args{};
  args.struct_size = sizeof(args);
  args.backend = backend;
  args.size = size;
  const std::string message = take_message(api().memory_allocate(&args), code);
  if (error != nullptr) *error = message;
  return args.buffer;
}

}  // namespace

TEST_CASE("a refusing backend answers probe as unavailable and refuses work before any hook runs") {
  BP_Backend* backend = create();
  BP_Buffer* buffer = allocate(backend, 8);
  REQUIRE(buffer != nullptr);
  const int live = g_live_buffers.load();
  g_refuse = true;
  const int calls = g_hook_calls.load();

  BP_ProbeArgs probe{};
  probe.struct_size = sizeof(probe);
  probe.backend = backend;
  REQUIRE(take_message(api().probe(&probe)).empty());
  CHECK(probe.available == 0);
  CHECK(std::string(probe.reason, probe.reason_size) == "this process was forked");

  std::string error;
  BP_ErrorCode code = 0;
  CHECK(allocate(backend, 8, &error, &code) == nullptr);
  CHECK(code == BP_ERROR_UNAVAILABLE);
  CHECK(error == "memory_allocate: this process was forked");
  char host[8] = {};
  BP_CopyToHostArgs read{sizeof(read), backend, buffer, 0, host, 8, nullptr, 0};
  CHECK(take_message(api().copy_to_host_async(&read), &code) == "copy_to_host_async: this process was forked");
  CHECK(code == BP_ERROR_UNAVAILABLE);
  BP_MemoryFreeArgs free_args{sizeof(free_args), backend, buffer};
  CHECK(take_message(api().memory_free(&free_args), &code) == "memory_free: this process was forked");
  CHECK(g_live_buffers.load() == live);  // refused, so still live
  CHECK(g_hook_calls.load() == calls);

  api().backend_destroy(backend);  // destroying is never refused
  CHECK(g_live_buffers.load() == live - 1);
  g_refuse = false;
}

TEST_CASE("memory_free reports a failed release, and the handle is gone either way") {
  BP_Backend* backend = create();
  BP_Buffer* buffer = allocate(backend, 8);
  const int live = g_live_buffers.load();
  const int releases = g_releases.load();
  g_fail_release = true;
  BP_MemoryFreeArgs free_args{sizeof(free_args), backend, buffer};
  BP_ErrorCode code = 0;
  CHECK(take_message(api().memory_free(&free_args), &code) == "guarded: the device lost the buffer");
  CHECK(code == BP_ERROR_DEVICE);
  g_fail_release = false;
  CHECK(g_releases.load() == releases + 1);
  CHECK(g_live_buffers.load() == live - 1);
  CHECK(take_message(api().memory_free(&free_args), &code).find("not a live buffer") != std::string::npos);
  api().backend_destroy(backend);
  CHECK(g_releases.load() == releases + 1);  // backend_destroy leaves freeing to the destructors
}

TEST_CASE("a copy on an unavailable backend says why it is unavailable, not that the buffer is unknown") {
  BP_Backend* backend = create(false);
  char host[4] = {};
  BP_CopyToDeviceArgs write{sizeof(write), backend, nullptr, 0, host, 4, nullptr, 0};
  BP_ErrorCode code = 0;
  CHECK(take_message(api().copy_to_device(&write), &code) == "copy_to_device: guarded is unavailable: switched off");
  CHECK(code == BP_ERROR_UNAVAILABLE);
  api().backend_destroy(backend);
}
