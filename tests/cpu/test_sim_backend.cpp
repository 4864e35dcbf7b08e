// The simulated accelerator (tests/plugins/sim), driven through the raw ABI:
// the stand-in for a discrete device in the cpu suite and beyond.
#include "support/plugin_harness.hpp"

#include <chrono>
#include <cstring>

namespace backplane::testing {
namespace {

const BP_PluginApi& sim() {
  static const BP_PluginApi& api = load_plugin(BP_TEST_SIM_PLUGIN);
  return api;
}

BP_Event* copy_in_async(const Backend& backend, BP_Buffer* destination, const void* source, std::uint64_t size) {
  auto args = detail::copy_to_device_args(backend.handle(), destination, 0, source, size);
  const PluginStatus submitted = status_of(sim().copy_to_device_async(&args));
  REQUIRE_MESSAGE(submitted.ok(), submitted.message());
  REQUIRE(args.event != nullptr);
  return args.event;
}

BP_Event* copy_out_async(const Backend& backend, BP_Buffer* source, void* destination, std::uint64_t size) {
  auto args = detail::copy_to_host_args(backend.handle(), source, 0, destination, size);
  const PluginStatus submitted = status_of(sim().copy_to_host_async(&args));
  REQUIRE_MESSAGE(submitted.ok(), submitted.message());
  REQUIRE(args.event != nullptr);
  return args.event;
}

}  // namespace

TEST_SUITE("cpu") {
  TEST_CASE("[sim] entry describes an async accelerator that is not host-addressable") {
    const BP_PluginApi& api = sim();
    CHECK(api.struct_size == sizeof(BP_PluginApi));
    CHECK(api.abi_major == BP_ABI_MAJOR);
    CHECK(std::string(api.name, api.name_size) == "sim");
    CHECK(api.priority == 50);
    CHECK(api.capabilities == (BP_CAPABILITY_PINNED_HOST | BP_CAPABILITY_ASYNC | BP_CAPABILITY_WRAP_MEMORY));
    CHECK((api.convert_integers == nullptr));

    Backend backend(api, {{"devices", "3"}, {"memory_limit", "4096"}});
    auto probe = detail::probe_args(backend.handle());
    probe.available = -1;
    BP_REQUIRE_OK(api.probe(&probe));
    CHECK(probe.available == 1);
    CHECK(backend.device_count() == 3);
    const BP_DeviceInfoArgs info = backend.info(2);
    CHECK(std::string(info.name, info.name_size) == "Simulated accelerator 2");
    CHECK(info.kind == BP_DEVICE_KIND_ACCELERATOR);
    CHECK(info.memory_total == 4096);
    CHECK(info.memory_free == 4096);
  }

  TEST_CASE("[sim] device memory and pinned host memory both have addresses") {
    Backend backend(sim());
    BP_Buffer* device = nullptr;
    void* address = reinterpret_cast<void*>(1);
    const PluginStatus allocated = backend.allocate(256, &device, &address);
    REQUIRE_MESSAGE(allocated.ok(), allocated.message());
    CHECK(device != nullptr);
    CHECK(address != nullptr);  // a device address, like CUDA's: the core never dereferences it
    BP_Buffer* pinned = nullptr;
    REQUIRE(backend.allocate(256, &pinned, &address, 0, BP_MEMORY_PINNED_HOST).ok());
    REQUIRE(address != nullptr);
    std::memset(address, 3, 256);
    BP_Buffer* empty = backend.allocate_ok(0);
    for (BP_Buffer* buffer : {device, pinned, empty}) BP_CHECK_OK(backend.free(buffer));
  }

  TEST_CASE("[sim] copies round-trip random bytes through device memory") {
    Backend backend(sim(), {{"devices", "2"}});
    const std::size_t size = 100'003;
    const std::vector<unsigned char> data = random_bytes(size, 42);
    BP_Buffer* first = backend.allocate_ok(size, 0);
    BP_Buffer* second = backend.allocate_ok(size + 5, 1);
    BP_CHECK_OK(backend.to_device(first, 0, data.data(), size));
    BP_CHECK_OK(backend.device_to_device(first, 0, second, 5, size));
    std::vector<unsigned char> back(size, 0);
    BP_CHECK_OK(backend.to_host(second, 5, back.data(), size));
    CHECK(back == data);

    // The same through the async calls and the worker thread.
    const std::vector<unsigned char> more = random_bytes(size, 43);
    BP_Event* in = copy_in_async(backend, first, more.data(), size);
    auto across = detail::copy_device_to_device_args(backend.handle(), first, 0, second, 5, size);
    BP_REQUIRE_OK(sim().copy_device_to_device_async(&across));
    std::vector<unsigned char> out(size, 0);
    auto last = detail::copy_to_host_args(backend.handle(), second, 5, out.data(), size);
    BP_REQUIRE_OK(sim().copy_to_host_async(&last));
    BP_CHECK_OK(backend.wait(last.event));  // copies run in submission order
    CHECK(backend.query(in) == 1);
    CHECK(out == more);
    for (BP_Event* event : {in, across.event, last.event}) sim().event_destroy(backend.handle(), event);
    for (BP_Buffer* buffer : {first, second}) BP_CHECK_OK(backend.free(buffer));
  }

  TEST_CASE("[sim] memory_limit: OOM names the size asked and free/total") {
    Backend backend(sim(), {{"memory_limit", "1000"}});
    BP_Buffer* first = backend.allocate_ok(600);
    CHECK(backend.info(0).memory_free == 400);
    BP_Buffer* second = nullptr;
    const PluginStatus refused = backend.allocate(600, &second);
    CHECK(refused.code() == ErrorCode::kOutOfMemory);
    CHECK(contains(refused.message(), "600 bytes"));
    CHECK(contains(refused.message(), "400 bytes free of 1000 bytes"));
    CHECK(second == nullptr);
    BP_Buffer* pinned = backend.allocate_ok(5000, 0, BP_MEMORY_PINNED_HOST);  // not device memory
    BP_CHECK_OK(backend.free(first));
    CHECK(backend.info(0).memory_free == 1000);
    second = backend.allocate_ok(1000);
    CHECK(backend.info(0).memory_free == 0);
    for (BP_Buffer* buffer : {second, pinned}) BP_CHECK_OK(backend.free(buffer));
  }

  TEST_CASE("[sim] fail_copy_at surfaces an async copy's error at event_wait") {
    Backend backend(sim(), {{"fail_copy_at", "2"}});
    const std::vector<unsigned char> data = random_bytes(64, 1);
    BP_Buffer* buffer = backend.allocate_ok(64);
    BP_Event* fine = copy_in_async(backend, buffer, data.data(), 64);
    std::vector<unsigned char> back(64, 0);
    BP_Event* broken = copy_out_async(backend, buffer, back.data(), 64);  // submission succeeds
    BP_CHECK_OK(backend.wait(fine));
    for (int attempt = 0; attempt < 2; ++attempt) {  // the same error every time
      const PluginStatus failed = backend.wait(broken);
      CHECK(failed.code() == ErrorCode::kDevice);
      CHECK(contains(failed.message(), "copy #2"));
      CHECK(contains(failed.message(), "fail_copy_at = 2"));
    }
    CHECK(backend.query(broken) == 1);
    CHECK(back == std::vector<unsigned char>(64, 0));          // no data moved
    BP_CHECK_OK(backend.to_host(buffer, 0, back.data(), 64));  // copy #3 works again
    CHECK(back == data);
    sim().event_destroy(backend.handle(), fine);
    sim().event_destroy(backend.handle(), broken);
    BP_CHECK_OK(backend.free(buffer));
  }

  TEST_CASE("[sim] fail_copy_at fails a sync copy at once; fail_alloc_at the Nth allocation") {
    Backend backend(sim(), {{"fail_copy_at", "1"}, {"fail_alloc_at", "2"}});
    BP_Buffer* buffer = backend.allocate_ok(8);
    unsigned char byte = 9;
    const PluginStatus copy = backend.to_device(buffer, 0, &byte, 1);
    CHECK(copy.code() == ErrorCode::kDevice);
    CHECK(contains(copy.message(), "copy #1"));
    BP_Buffer* second = nullptr;
    const PluginStatus allocation = backend.allocate(8, &second);
    CHECK(allocation.code() == ErrorCode::kOutOfMemory);
    CHECK(contains(allocation.message(), "fail_alloc_at = 2"));
    CHECK(backend.info(0).memory_free == (std::uint64_t{1} << 30) - 8);  // nothing leaked
    second = backend.allocate_ok(8);                                     // the 3rd works
    BP_CHECK_OK(backend.to_device(second, 0, &byte, 1));
    for (BP_Buffer* each : {buffer, second}) BP_CHECK_OK(backend.free(each));
  }

  TEST_CASE("[sim] the worker thread starts on the first async copy, not in create or probe") {
    const int before = thread_count();
    {
      Backend backend(sim());
      auto probe = detail::probe_args(backend.handle());
      probe.available = -1;
      BP_CHECK_OK(sim().probe(&probe));
      BP_Buffer* buffer = backend.allocate_ok(16);
      unsigned char bytes[16] = {1};
      BP_CHECK_OK(backend.to_device(buffer, 0, bytes, 16));
      CHECK(thread_count() == before);
      BP_Event* event = copy_in_async(backend, buffer, bytes, 16);
      CHECK(thread_count() == before + 1);
      BP_CHECK_OK(backend.wait(event));
      sim().event_destroy(backend.handle(), event);
      BP_CHECK_OK(backend.free(buffer));
    }
    CHECK(thread_count_settled_at(before) == before);  // joined by backend_destroy
  }

  TEST_CASE("[sim] copy_delay_us makes async copies observably overlap the caller") {
    // No upper bound on time (shared machines are noisy): the copy is still
    // pending right after submission, and waiting takes at least the delay.
    Backend backend(sim(), {{"copy_delay_us", "200000"}});
    const std::vector<unsigned char> data = random_bytes(256, 5);
    BP_Buffer* buffer = backend.allocate_ok(256);
    const auto start = std::chrono::steady_clock::now();
    BP_Event* event = copy_in_async(backend, buffer, data.data(), 256);
    CHECK(backend.query(event) == 0);
    BP_CHECK_OK(backend.wait(event));
    const auto finished = std::chrono::steady_clock::now();
    CHECK(finished - start >= std::chrono::milliseconds(200));
    CHECK(backend.query(event) == 1);
    sim().event_destroy(backend.handle(), event);

    // Destroying the backend with a copy still queued drains it, then joins.
    std::vector<unsigned char> late(256, 0);
    {
      Backend short_lived(sim(), {{"copy_delay_us", "20000"}});
      BP_Buffer* source = short_lived.allocate_ok(256);
      BP_CHECK_OK(short_lived.to_device(source, 0, data.data(), 256));
      copy_out_async(short_lived, source, late.data(), 256);
      BP_CHECK_OK(short_lived.free(source));  // storage outlives the queued copy
    }
    CHECK(late == data);
    BP_CHECK_OK(backend.free(buffer));
  }

  TEST_CASE("[sim] copy_bytes_per_second caps each device's copy engine") {
    // Only lower bounds (a loaded machine only makes copies slower): 1 MiB at
    // 8 MiB/s takes at least 1/8 s, sync or async, and a second copy on the
    // same engine waits for the first's share. The sum over several engines
    // is bench_many_devices' to measure.
    constexpr std::uint64_t kSize = 1 << 20;
    Backend backend(sim(), {{"copy_bytes_per_second", std::to_string(8 * kSize)}, {"devices", "2"}});
    const std::vector<unsigned char> data = random_bytes(kSize, 6);
    BP_Buffer* buffer = backend.allocate_ok(kSize);
    auto start = std::chrono::steady_clock::now();
    BP_CHECK_OK(backend.to_device(buffer, 0, data.data(), kSize));
    CHECK(std::chrono::steady_clock::now() - start >= std::chrono::milliseconds(125));
    start = std::chrono::steady_clock::now();
    BP_Event* first = copy_in_async(backend, buffer, data.data(), kSize);
    BP_Event* second = copy_in_async(backend, buffer, data.data(), kSize);
    BP_CHECK_OK(backend.wait(second));
    BP_CHECK_OK(backend.wait(first));
    CHECK(std::chrono::steady_clock::now() - start >= std::chrono::milliseconds(250));
    sim().event_destroy(backend.handle(), first);
    sim().event_destroy(backend.handle(), second);
    std::vector<unsigned char> back(kSize, 0);
    BP_CHECK_OK(backend.to_host(buffer, 0, back.data(), kSize));
    CHECK(back == data);
    BP_CHECK_OK(backend.free(buffer));
  }

  TEST_CASE("[sim] bad options and handles are refused with named errors") {
    const std::vector<std::pair<std::string, std::string>> bad = {
        {"devices", "0"},       {"memory_limit", "1GiB"}, {"fail_copy_at", "-1"},
        {"copy_delay_us", "x"}, {"speed", "11"},          {"copy_bytes_per_second", "fast"}};
    for (const auto& [key, value] : bad) {
      CAPTURE(key);
      BP_Backend* handle = nullptr;
      const PluginStatus result = try_create(sim(), {{key, value}}, &handle);
      CHECK(result.code() == ErrorCode::kInvalidArgument);
      CHECK(contains(result.message(), key));
      CHECK(contains(result.message(), value));
    }
    Backend backend(sim());
    Backend other(sim());
    BP_Buffer* foreign = other.allocate_ok(8);
    unsigned char byte = 0;
    CHECK(backend.to_host(foreign, 0, &byte, 1).code() == ErrorCode::kInvalidArgument);
    CHECK(backend.free(foreign).code() == ErrorCode::kInvalidArgument);
    const PluginStatus range = other.to_host(foreign, 4, &byte, 5);
    CHECK(range.code() == ErrorCode::kOutOfRange);
    CHECK(contains(range.message(), "offset 4"));
    CHECK(contains(range.message(), "size 5"));
    CHECK(contains(range.message(), "buffer size 8"));
    PluginStatus ordinal;
    backend.info(1, &ordinal);
    CHECK(ordinal.code() == ErrorCode::kOutOfRange);
    CHECK(contains(ordinal.message(), "ordinal 1"));
    BP_CHECK_OK(other.free(foreign));
    CHECK(other.free(foreign).code() == ErrorCode::kInvalidArgument);
  }

}  // TEST_SUITE

TEST_CASE("[sim] memory_wrap accepts only ranges inside a live device allocation of that device") {
  Backend backend(sim(), {{"devices", "2"}, {"memory_limit", "100000"}});
  const std::vector<unsigned char> data = random_bytes(4096, 9);
  BP_Buffer* home = nullptr;
  void* address = nullptr;
  BP_REQUIRE_OK(backend.allocate(data.size(), &home, &address, 1));
  BP_REQUIRE_OK(backend.to_device(home, 0, data.data(), data.size()));
  auto* base = static_cast<unsigned char*>(address);

  BP_Buffer* wrapped = nullptr;
  BP_REQUIRE_OK(backend.wrap(base + 100, 3996, &wrapped, 1));
  std::vector<unsigned char> read(3996);
  BP_CHECK_OK(backend.to_host(wrapped, 0, read.data(), read.size()));
  CHECK(std::equal(read.begin(), read.end(), data.begin() + 100));
  CHECK(backend.info(1).memory_free == 100000 - 4096);  // a wrap allocates nothing
  BP_CHECK_OK(backend.free(wrapped));
  CHECK(backend.info(1).memory_free == 100000 - 4096);

  BP_Buffer* refused = nullptr;
  const PluginStatus other_device = backend.wrap(base, 16, &refused, 0);
  CHECK(other_device.code() == ErrorCode::kInvalidArgument);
  CHECK(other_device.message().find("the address is memory of sim:1") != std::string::npos);
  const PluginStatus past_end = backend.wrap(base + 4000, 97, &refused, 1);
  CHECK(past_end.code() == ErrorCode::kOutOfRange);
  CHECK(past_end.message().find("runs past the end of its 4.00 KiB allocation (it starts 4000 bytes in)") !=
        std::string::npos);
  const unsigned char stranger[16] = {};
  const PluginStatus unknown = backend.wrap(const_cast<unsigned char*>(stranger), 16, &refused, 1);
  CHECK(unknown.code() == ErrorCode::kInvalidArgument);
  CHECK(unknown.message().find("not in a live device allocation") != std::string::npos);
  BP_CHECK_OK(backend.free(home));
}

}  // namespace backplane::testing
