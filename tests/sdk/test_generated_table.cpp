// The table the SDK generates, driven through the raw ABI for a small backend
// defined here: the SDK must check everything before a hook runs, keep what
// the ABI says stays valid, and turn every failure into a BP_Error.
#include <backplane/plugin_sdk.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace {

namespace sdk = backplane::plugin_sdk;

std::atomic<int> g_live_buffers{0};
std::atomic<int> g_hook_calls{0};
std::atomic<int> g_waits{0};

// Two devices of host memory; copies to the device complete on wait(),
// so the tests can tell "handed out an event" from "ran inline".
class DemoBackend {
 public:
  static constexpr sdk::Identity kIdentity{
      .name = "demo",
      .version = "1.0-test",
      .priority = 7,
      .capabilities = BP_CAPABILITY_HOST_ADDRESSABLE | BP_CAPABILITY_ASYNC,
      .dlpack_device_type = 1,
  };
  struct Buffer : sdk::BufferBase {
    std::vector<std::byte> bytes;
    Buffer() { ++g_live_buffers; }
    ~Buffer() { --g_live_buffers; }
  };
  struct Event {
    std::function<void()> work;
  };

  static std::unique_ptr<DemoBackend> create(const sdk::Options& options) {
    options.allow_only({"available", "priority"});
    auto backend = std::make_unique<DemoBackend>();
    backend->available_ = options.integer("available", 1, 0, 1) == 1;
    backend->priority_ = static_cast<std::int32_t>(options.integer("priority", 7, 0, 1000));
    return backend;
  }
  sdk::Probe probe() { return {available_, available_ ? "two demo devices" : "no demo hardware here", priority_}; }
  std::int32_t device_count() { return 2; }
  sdk::DeviceDescription describe(std::int32_t ordinal) {
    return {"Demo " + std::to_string(ordinal), BP_DEVICE_KIND_ACCELERATOR, {{"serial", std::to_string(100 + ordinal)}}};
  }
  sdk::MemoryFigures memory(std::int32_t) { return {1 << 20, 1 << 19}; }
  std::unique_ptr<Buffer> allocate(std::int32_t ordinal, BP_MemoryKind kind, std::uint64_t size) {
    ++g_hook_calls;
    if (size == 13) throw std::runtime_error("thirteen is unlucky");
    if (size == 666) throw sdk::Failure(BP_ERROR_OUT_OF_MEMORY, "demo: no memory for 666 bytes");
    auto buffer = std::make_unique<Buffer>();
    buffer->ordinal = ordinal;
    buffer->kind = kind;
    buffer->size = size;
    buffer->bytes.resize(size + 1);
    buffer->address = buffer->bytes.data();
    return buffer;
  }
  std::unique_ptr<Event> copy_to_device(Buffer& destination, std::uint64_t offset, const void* source,
                                        std::uint64_t size, sdk::Mode) {
    ++g_hook_calls;
    auto event = std::make_unique<Event>();
    event->work = [=, &destination] { std::memcpy(destination.bytes.data() + offset, source, size); };
    return event;
  }
  std::unique_ptr<Event> copy_to_host(Buffer& source, std::uint64_t offset, void* destination, std::uint64_t size,
                                      sdk::Mode) {
    ++g_hook_calls;
    std::memcpy(destination, source.bytes.data() + offset, size);
    return nullptr;
  }
  std::unique_ptr<Event> copy_device_to_device(Buffer&, std::uint64_t, Buffer&, std::uint64_t, std::uint64_t,
                                               sdk::Mode) {
    ++g_hook_calls;
    return nullptr;
  }
  void wait(Event& event) {
    ++g_waits;
    if (event.work) std::exchange(event.work, {})();
  }
  bool query(Event& event) { return !event.work; }

 private:
  bool available_ = true;
  std::int32_t priority_ = 7;
};

const BP_PluginApi& api() { return *sdk::table<DemoBackend>(); }

std::string take_message(BP_Error* error, BP_ErrorCode* code = nullptr) {
  if (error == nullptr) return "";
  std::string message(error->message, error->message_size);
  if (code != nullptr) *code = error->code;
  error->destroy(error);
  return message;
}

struct Demo {
  BP_Backend* backend = nullptr;
  explicit Demo(std::vector<BP_KeyValue> options = {}) {
    BP_BackendCreateArgs args{sizeof(args), options.data(), options.size(), nullptr};
    REQUIRE(take_message(api().backend_create(&args)).empty());
    backend = args.backend;
  }
  ~Demo() { api().backend_destroy(backend); }

  BP_Buffer* allocate(std::uint64_t size, std::int32_t ordinal = 0, std::string* error = nullptr,
                      BP_ErrorCode* code = nullptr) {
    BP_MemoryAllocateArgs args{};
    args.struct_size = sizeof(args);
    args.backend = backend;
    args.ordinal = ordinal;
    args.size = size;
    const std::string message = take_message(api().memory_allocate(&args), code);
    if (error != nullptr) *error = message;
    return args.buffer;
  }
};

}  // namespace

TEST_CASE("the generated table carries the identity and offers exactly the hooks the class has") {
  CHECK(std::string(api().name, api().name_size) == "demo");
  CHECK(std::string(api().version, api().version_size) == "1.0-test");
  CHECK(api().abi_major == BP_ABI_MAJOR);
  CHECK(api().abi_minor == BP_ABI_MINOR);
  CHECK(api().priority == 7);
  CHECK(api().dlpack_device_type == 1);
  CHECK_FALSE(BP_TABLE_HAS_CALL(&api(), convert_integers));
  CHECK_FALSE(BP_TABLE_HAS_CALL(&api(), memory_wrap));
}

TEST_CASE("probe, devices and descriptions: strings stay valid and identical across calls") {
  Demo demo;
  BP_ProbeArgs probe{};
  probe.struct_size = sizeof(probe);
  probe.backend = demo.backend;
  probe.priority = -1;
  REQUIRE(take_message(api().probe(&probe)).empty());
  CHECK(probe.available == 1);
  CHECK(std::string(probe.reason, probe.reason_size) == "two demo devices");
  CHECK(probe.priority == 7);

  BP_DeviceInfoArgs first{};
  first.struct_size = sizeof(first);
  first.backend = demo.backend;
  first.ordinal = 1;
  REQUIRE(take_message(api().device_info(&first)).empty());
  BP_DeviceInfoArgs second = first;
  REQUIRE(take_message(api().device_info(&second)).empty());
  CHECK(std::string(first.name, first.name_size) == "Demo 1");
  CHECK(first.name == second.name);
  CHECK(first.attributes == second.attributes);
  REQUIRE(first.attribute_count == 1);
  CHECK(std::string(first.attributes[0].value, first.attributes[0].value_size) == "101");
  CHECK(first.memory_free == 1 << 19);
}

TEST_CASE("a probe-reported priority is written only into a struct that has the field") {
  Demo demo({{sizeof(BP_KeyValue), "priority", 8, "250", 3}});
  BP_ProbeArgs probe{};
  probe.struct_size = BP_PROBE_ARGS_SIZE_1_0;  // an ABI 1.1 caller
  probe.backend = demo.backend;
  probe.priority = -1;
  REQUIRE(take_message(api().probe(&probe)).empty());
  CHECK(probe.priority == -1);
  probe.struct_size = sizeof(probe);
  REQUIRE(take_message(api().probe(&probe)).empty());
  CHECK(probe.priority == 250);
}

TEST_CASE("an unavailable backend has no devices and refuses device calls with its reason") {
  Demo demo({{sizeof(BP_KeyValue), "available", 9, "0", 1}});
  BP_DeviceCountArgs count{sizeof(count), demo.backend, -1};
  REQUIRE(take_message(api().device_count(&count)).empty());
  CHECK(count.count == 0);
  std::string error;
  BP_ErrorCode code = 0;
  CHECK(demo.allocate(16, 0, &error, &code) == nullptr);
  CHECK(code == BP_ERROR_UNAVAILABLE);
  CHECK(error == "memory_allocate: demo is unavailable: no demo hardware here");
}

TEST_CASE("bad ordinals, kinds, handles and ranges are refused before a hook runs") {
  Demo demo;
  Demo other;
  BP_Buffer* buffer = demo.allocate(16);
  BP_Buffer* foreign = other.allocate(16);
  REQUIRE(buffer != nullptr);
  const int calls_before = g_hook_calls.load();

  std::string error;
  BP_ErrorCode code = 0;
  demo.allocate(16, 2, &error, &code);
  CHECK(code == BP_ERROR_OUT_OF_RANGE);
  CHECK(error == "memory_allocate: demo device ordinal 2 is out of range: the backend has 2 device(s), demo:0..demo:1");

  BP_MemoryAllocateArgs pinned{};
  pinned.struct_size = sizeof(pinned);
  pinned.backend = demo.backend;
  pinned.kind = BP_MEMORY_PINNED_HOST;
  CHECK(take_message(api().memory_allocate(&pinned), &code) == "memory_allocate: demo offers no pinned host memory");
  CHECK(code == BP_ERROR_UNSUPPORTED);

  char host[32] = {};
  BP_CopyToHostArgs read{sizeof(read), demo.backend, buffer, 8, host, 9, nullptr, 0};
  CHECK(take_message(api().copy_to_host(&read), &code) ==
        "copy_to_host: source range at offset 8 of size 9 does not fit in buffer size 16");
  CHECK(code == BP_ERROR_OUT_OF_RANGE);
  read = {sizeof(read), demo.backend, foreign, 0, host, 4, nullptr, 0};
  CHECK(take_message(api().copy_to_host(&read), &code) ==
        "copy_to_host: source buffer handle is not a live buffer of this demo backend (already freed, or from "
        "another backend)");
  CHECK(code == BP_ERROR_INVALID_ARGUMENT);
  read = {sizeof(read), demo.backend, buffer, 0, nullptr, 4, nullptr, 0};
  CHECK(take_message(api().copy_to_host(&read)) == "copy_to_host: destination host pointer is NULL with size 4");
  read = {sizeof(read), nullptr, buffer, 0, host, 4, nullptr, 0};
  CHECK(take_message(api().copy_to_host(&read)) == "copy_to_host: backend is NULL");
  read = {BP_COPY_TO_HOST_ARGS_SIZE_1_0 - 8, demo.backend, buffer, 0, host, 4, nullptr, 0};  // short of `event`
  CHECK(take_message(api().copy_to_host(&read)).find("struct_size") != std::string::npos);
  CHECK(g_hook_calls.load() == calls_before);
}

TEST_CASE("a hook's exception becomes an error with its code and message") {
  Demo demo;
  std::string error;
  BP_ErrorCode code = 0;
  CHECK(demo.allocate(13, 0, &error, &code) == nullptr);
  CHECK(code == BP_ERROR_INTERNAL);
  CHECK(error == "thirteen is unlucky");
  CHECK(demo.allocate(666, 0, &error, &code) == nullptr);
  CHECK(code == BP_ERROR_OUT_OF_MEMORY);
  CHECK(error == "demo: no memory for 666 bytes");
}

TEST_CASE("blocking copies wait on the hook's event; async ones hand it out, or a completed one") {
  Demo demo;
  BP_Buffer* buffer = demo.allocate(8);
  const char text[8] = "abcdefg";
  const int waits = g_waits.load();
  BP_CopyToDeviceArgs write{sizeof(write), demo.backend, buffer, 0, text, 8, nullptr, 0};
  REQUIRE(take_message(api().copy_to_device(&write)).empty());
  CHECK(g_waits.load() == waits + 1);
  CHECK(write.event == nullptr);

  REQUIRE(take_message(api().copy_to_device_async(&write)).empty());
  REQUIRE(write.event != nullptr);
  BP_EventArgs event{sizeof(event), demo.backend, write.event, -1};
  REQUIRE(take_message(api().event_query(&event)).empty());
  CHECK(event.done == 0);
  REQUIRE(take_message(api().event_wait(&event)).empty());
  REQUIRE(take_message(api().event_query(&event)).empty());
  CHECK(event.done == 1);
  api().event_destroy(demo.backend, write.event);
  CHECK(take_message(api().event_wait(&event)) == "event_wait: event handle is not a live event of this demo backend");

  char back[8] = {};
  BP_CopyToHostArgs read{sizeof(read), demo.backend, buffer, 0, back, 8, nullptr, 0};
  REQUIRE(take_message(api().copy_to_host_async(&read)).empty());
  REQUIRE(read.event != nullptr);  // ran inline: a completed event all the same
  event.event = read.event;
  REQUIRE(take_message(api().event_query(&event)).empty());
  CHECK(event.done == 1);
  CHECK(std::string(back, 7) == "abcdefg");
  api().event_destroy(demo.backend, read.event);
}

TEST_CASE("freeing twice is an error, and backend_destroy releases what is still live") {
  const int live_before = g_live_buffers.load();
  {
    Demo demo;
    BP_Buffer* freed = demo.allocate(4);
    demo.allocate(4);
    demo.allocate(4);
    CHECK(g_live_buffers.load() == live_before + 3);
    BP_MemoryFreeArgs free_args{sizeof(free_args), demo.backend, freed};
    REQUIRE(take_message(api().memory_free(&free_args)).empty());
    BP_ErrorCode code = 0;
    CHECK(take_message(api().memory_free(&free_args), &code) ==
          "memory_free: buffer handle is not a live buffer of this demo backend (already freed, or from another "
          "backend)");
    CHECK(code == BP_ERROR_INVALID_ARGUMENT);
  }
  CHECK(g_live_buffers.load() == live_before);
}

TEST_CASE("a destroyed backend's handle is refused by every call") {
  BP_BackendCreateArgs create{sizeof(create), nullptr, 0, nullptr};
  REQUIRE(take_message(api().backend_create(&create)).empty());
  api().backend_destroy(create.backend);
  BP_DeviceCountArgs count{sizeof(count), create.backend, -1};
  CHECK(take_message(api().device_count(&count)) == "device_count: backend handle is not a live demo backend");
}
