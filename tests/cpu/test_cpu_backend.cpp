// The CPU plugin, driven through the raw ABI from its built file.
#include "support/plugin_harness.hpp"

#include <algorithm>
#include <cstring>
#include <thread>

namespace backplane::testing {
namespace {

const BP_PluginApi& cpu() {
  static const BP_PluginApi& api = load_plugin(BP_TEST_CPU_PLUGIN);
  return api;
}

std::string string_of(const char* data, std::size_t size) { return data ? std::string(data, size) : ""; }

}  // namespace

TEST_SUITE("cpu") {
  TEST_CASE("[cpu] entry negotiates ABI 1 and describes the backend") {
    const BP_PluginApi& api = cpu();
    CHECK(api.struct_size == sizeof(BP_PluginApi));
    CHECK(api.abi_major == BP_ABI_MAJOR);
    CHECK(api.abi_minor == BP_ABI_MINOR);
    CHECK(string_of(api.name, api.name_size) == "cpu");
    CHECK(api.version_size > 0);
    CHECK(api.priority == 10);
    CHECK(api.capabilities == (BP_CAPABILITY_HOST_ADDRESSABLE | BP_CAPABILITY_PINNED_HOST | BP_CAPABILITY_WRAP_MEMORY));
    CHECK((api.memory_wrap != nullptr));
    CHECK((api.convert_integers == nullptr));
    for (const void* call :
         {reinterpret_cast<const void*>(api.backend_create), reinterpret_cast<const void*>(api.backend_destroy),
          reinterpret_cast<const void*>(api.probe), reinterpret_cast<const void*>(api.device_count),
          reinterpret_cast<const void*>(api.device_info), reinterpret_cast<const void*>(api.memory_allocate),
          reinterpret_cast<const void*>(api.memory_free), reinterpret_cast<const void*>(api.copy_to_device),
          reinterpret_cast<const void*>(api.copy_to_host), reinterpret_cast<const void*>(api.copy_device_to_device),
          reinterpret_cast<const void*>(api.copy_to_device_async),
          reinterpret_cast<const void*>(api.copy_to_host_async),
          reinterpret_cast<const void*>(api.copy_device_to_device_async), reinterpret_cast<const void*>(api.event_wait),
          reinterpret_cast<const void*>(api.event_query), reinterpret_cast<const void*>(api.event_destroy)}) {
      CHECK(call != nullptr);
    }
  }

  TEST_CASE("[cpu] plugin files export exactly one dynamic symbol") {
    for (const char* path : {BP_TEST_CPU_PLUGIN, BP_TEST_SIM_PLUGIN}) {
      CAPTURE(path);
      CHECK(exported_symbols(path) == std::vector<std::string>{BP_PLUGIN_ENTRY_SYMBOL});
    }
  }

  TEST_CASE("[cpu] probe says available with a description") {
    Backend backend(cpu());
    auto probe = detail::probe_args(backend.handle());
    probe.available = -1;
    BP_REQUIRE_OK(cpu().probe(&probe));
    CHECK(probe.available == 1);
    CHECK(contains(string_of(probe.reason, probe.reason_size), "1 device"));
    CHECK(backend.device_count() == 1);
  }

  TEST_CASE("[cpu] devices option exposes N named devices with attributes") {
    Backend backend(cpu(), {{"devices", "4"}});
    REQUIRE(backend.device_count() == 4);
    for (std::int32_t ordinal = 0; ordinal < 4; ++ordinal) {
      const BP_DeviceInfoArgs info = backend.info(ordinal);
      const std::string name = string_of(info.name, info.name_size);
      CHECK(name.rfind("CPU " + std::to_string(ordinal) + " (", 0) == 0);
      CHECK(name.back() == ')');
      CHECK(info.kind == BP_DEVICE_KIND_CPU);
      CHECK(info.memory_total > 0);
      CHECK(info.memory_free > 0);
      CHECK(info.memory_free <= info.memory_total);
      std::vector<std::string> keys;
      for (std::size_t index = 0; index < info.attribute_count; ++index) {
        keys.push_back(string_of(info.attributes[index].key, info.attributes[index].key_size));
      }
      CHECK(std::find(keys.begin(), keys.end(), "cores") != keys.end());
      CHECK(std::find(keys.begin(), keys.end(), "model") != keys.end());
    }
  }

  TEST_CASE("[cpu] bad options are refused naming the key and value") {
    for (const char* value : {"0", "65", "abc", "4x", " 4", "-1", "+2", "", "99999999999"}) {
      CAPTURE(value);
      BP_Backend* backend = nullptr;
      const PluginStatus result = try_create(cpu(), {{"devices", value}}, &backend);
      CHECK(result.code() == ErrorCode::kInvalidArgument);
      CHECK(contains(result.message(), "devices"));
      CHECK(contains(result.message(), "\"" + std::string(value) + "\""));
    }
    BP_Backend* backend = nullptr;
    const PluginStatus unknown = try_create(cpu(), {{"colour", "blue"}}, &backend);
    CHECK(unknown.code() == ErrorCode::kInvalidArgument);
    CHECK(contains(unknown.message(), "colour"));
    CHECK(contains(unknown.message(), "blue"));
    Backend most(cpu(), {{"devices", "64"}});
    CHECK(most.device_count() == 64);
  }

  TEST_CASE("[cpu] an out-of-range ordinal names the ordinal and the count") {
    Backend backend(cpu(), {{"devices", "4"}});
    for (std::int32_t ordinal : {4, -1, 1000}) {
      CAPTURE(ordinal);
      PluginStatus result;
      backend.info(ordinal, &result);
      CHECK(result.code() == ErrorCode::kOutOfRange);
      CHECK(contains(result.message(), "ordinal " + std::to_string(ordinal)));
      CHECK(contains(result.message(), "4 device"));
    }
    BP_Buffer* buffer = nullptr;
    const PluginStatus allocation = backend.allocate(16, &buffer, nullptr, 9);
    CHECK(allocation.code() == ErrorCode::kOutOfRange);
    CHECK(contains(allocation.message(), "ordinal 9"));
    CHECK(buffer == nullptr);
  }

  TEST_CASE("[cpu] allocations are aligned host memory, size 0 included") {
    Backend backend(cpu(), {{"devices", "2"}});
    for (BP_MemoryKind kind : {BP_MEMORY_DEVICE, BP_MEMORY_PINNED_HOST}) {
      for (std::uint64_t size : {0ULL, 1ULL, 63ULL, 64ULL, 1000ULL, 1ULL << 20}) {
        CAPTURE(kind);
        CAPTURE(size);
        BP_Buffer* buffer = nullptr;
        void* address = nullptr;
        const PluginStatus result = backend.allocate(size, &buffer, &address, 1, kind);
        REQUIRE_MESSAGE(result.ok(), result.message());
        CHECK(buffer != nullptr);
        REQUIRE(address != nullptr);
        CHECK(reinterpret_cast<std::uintptr_t>(address) % 64 == 0);
        if (size > 0) {  // host-addressable: the address is usable memory
          std::memset(address, 0x5a, size);
          CHECK(static_cast<unsigned char*>(address)[size - 1] == 0x5a);
        }
        const unsigned char nothing = 0;
        BP_CHECK_OK(backend.to_device(buffer, size, &nothing, 0));  // size-0 copy at the end
        BP_CHECK_OK(backend.free(buffer));
      }
    }
    BP_Buffer* buffer = nullptr;
    const PluginStatus bad_kind = backend.allocate(16, &buffer, nullptr, 0, BP_MemoryKind{7});
    CHECK(bad_kind.code() == ErrorCode::kInvalidArgument);
    CHECK(contains(bad_kind.message(), "kind 7"));
  }

  TEST_CASE("[cpu] copies round-trip random bytes") {
    Backend backend(cpu(), {{"devices", "2"}});
    const std::size_t size = (1 << 20) + 13;
    const std::vector<unsigned char> data = random_bytes(size, 0xc0ffee);
    BP_Buffer* first = backend.allocate_ok(size + 7, 0);
    BP_Buffer* second = backend.allocate_ok(size + 3, 1);
    BP_CHECK_OK(backend.to_device(first, 7, data.data(), size));
    BP_CHECK_OK(backend.device_to_device(first, 7, second, 3, size));
    std::vector<unsigned char> back(size, 0);
    BP_CHECK_OK(backend.to_host(second, 3, back.data(), size));
    CHECK(back == data);

    // Host-addressable: the address sees what the copies wrote.
    BP_Buffer* mapped = nullptr;
    void* address = nullptr;
    REQUIRE(backend.allocate(64, &mapped, &address).ok());
    BP_CHECK_OK(backend.to_device(mapped, 0, data.data(), 64));
    CHECK(std::memcmp(address, data.data(), 64) == 0);

    for (BP_Buffer* buffer : {first, second, mapped}) BP_CHECK_OK(backend.free(buffer));
  }

  TEST_CASE("[cpu] an out-of-range copy names offset, size and buffer size") {
    Backend backend(cpu());
    BP_Buffer* buffer = backend.allocate_ok(120);
    std::vector<unsigned char> host(200, 1);
    const PluginStatus in = backend.to_device(buffer, 100, host.data(), 50);
    CHECK(in.code() == ErrorCode::kOutOfRange);
    CHECK(contains(in.message(), "offset 100"));
    CHECK(contains(in.message(), "size 50"));
    CHECK(contains(in.message(), "buffer size 120"));

    const PluginStatus out = backend.to_host(buffer, 121, host.data(), 0);
    CHECK(out.code() == ErrorCode::kOutOfRange);

    // offset + size wraps around 2^64: still refused, never a wild write.
    const PluginStatus wrap = backend.to_device(buffer, UINT64_MAX - 1, host.data(), 4);
    CHECK(wrap.code() == ErrorCode::kOutOfRange);
    CHECK(contains(wrap.message(), std::to_string(UINT64_MAX - 1)));

    BP_Buffer* other = backend.allocate_ok(10);
    const PluginStatus between = backend.device_to_device(buffer, 0, other, 5, 6);
    CHECK(between.code() == ErrorCode::kOutOfRange);
    CHECK(contains(between.message(), "buffer size 10"));
    BP_CHECK_OK(backend.to_device(buffer, 120, host.data(), 0));  // empty range at the end fits
    BP_CHECK_OK(backend.free(buffer));
    BP_CHECK_OK(backend.free(other));
  }

  TEST_CASE("[cpu] invalid handles are refused, never a crash") {
    Backend backend(cpu());
    Backend elsewhere(cpu());
    unsigned char byte = 1;

    const PluginStatus null_buffer = backend.to_device(nullptr, 0, &byte, 1);
    CHECK(null_buffer.code() == ErrorCode::kInvalidArgument);
    CHECK(contains(null_buffer.message(), "NULL"));

    BP_Buffer* foreign = elsewhere.allocate_ok(8);
    const PluginStatus wrong_backend = backend.to_host(foreign, 0, &byte, 1);
    CHECK(wrong_backend.code() == ErrorCode::kInvalidArgument);
    CHECK(backend.free(foreign).code() == ErrorCode::kInvalidArgument);
    BP_CHECK_OK(elsewhere.free(foreign));

    BP_Buffer* freed = backend.allocate_ok(8);
    BP_CHECK_OK(backend.free(freed));
    CHECK(backend.free(freed).code() == ErrorCode::kInvalidArgument);
    CHECK(backend.to_device(freed, 0, &byte, 1).code() == ErrorCode::kInvalidArgument);
    BP_CHECK_OK(backend.free(nullptr));  // NULL is a no-op

    BP_Buffer* buffer = backend.allocate_ok(8);
    CHECK(backend.to_device(buffer, 0, nullptr, 1).code() == ErrorCode::kInvalidArgument);

    auto no_backend = detail::device_count_args(nullptr);
    CHECK(status_of(cpu().device_count(&no_backend)).code() == ErrorCode::kInvalidArgument);
    CHECK(status_of(cpu().probe(nullptr)).code() == ErrorCode::kInvalidArgument);
    BP_DeviceCountArgs too_small{8, backend.handle(), 0};
    const PluginStatus small = status_of(cpu().device_count(&too_small));
    CHECK(small.code() == ErrorCode::kInvalidArgument);
    CHECK(contains(small.message(), "struct_size 8"));

    auto bogus_event = detail::event_args(backend.handle(), reinterpret_cast<BP_Event*>(buffer));
    CHECK(status_of(cpu().event_wait(&bogus_event)).code() == ErrorCode::kInvalidArgument);
    cpu().event_destroy(backend.handle(), reinterpret_cast<BP_Event*>(buffer));  // ignored, no crash
    BP_CHECK_OK(backend.free(buffer));
  }

  TEST_CASE("[cpu] async copies complete inline and return a finished event") {
    Backend backend(cpu());
    const std::vector<unsigned char> data = random_bytes(4096, 7);
    BP_Buffer* buffer = backend.allocate_ok(data.size());
    auto in = detail::copy_to_device_args(backend.handle(), buffer, 0, data.data(), data.size());
    BP_REQUIRE_OK(cpu().copy_to_device_async(&in));
    REQUIRE(in.event != nullptr);
    CHECK(backend.query(in.event) == 1);
    BP_CHECK_OK(backend.wait(in.event));
    BP_CHECK_OK(backend.wait(in.event));  // may be waited on more than once
    cpu().event_destroy(backend.handle(), in.event);

    std::vector<unsigned char> back(data.size(), 0);
    auto out = detail::copy_to_host_args(backend.handle(), buffer, 0, back.data(), back.size());
    BP_REQUIRE_OK(cpu().copy_to_host_async(&out));
    BP_CHECK_OK(backend.wait(out.event));
    cpu().event_destroy(backend.handle(), out.event);
    CHECK(back == data);

    auto bad = detail::copy_to_host_args(backend.handle(), buffer, 1, back.data(), back.size());
    CHECK(status_of(cpu().copy_to_host_async(&bad)).code() == ErrorCode::kOutOfRange);
    CHECK(bad.event == nullptr);
    BP_CHECK_OK(backend.free(buffer));
  }

  TEST_CASE("[cpu] concurrent allocations and copies from several threads") {
    Backend backend(cpu(), {{"devices", "2"}});
    std::vector<std::thread> threads;
    std::vector<int> failures(4, 0);
    for (int worker = 0; worker < 4; ++worker) {
      threads.emplace_back([&, worker] {
        const std::vector<unsigned char> data = random_bytes(512, static_cast<std::uint64_t>(worker));
        std::vector<unsigned char> back(512);
        for (int round = 0; round < 200; ++round) {
          auto allocate = detail::memory_allocate_args(backend.handle(), worker % 2, BP_MEMORY_DEVICE, 512);
          if (!status_of(cpu().memory_allocate(&allocate)).ok()) {
            ++failures[worker];
            continue;
          }
          const bool good = backend.to_device(allocate.buffer, 0, data.data(), 512).ok() &&
                            backend.to_host(allocate.buffer, 0, back.data(), 512).ok() && back == data &&
                            backend.free(allocate.buffer).ok();
          if (!good) ++failures[worker];
        }
      });
    }
    for (auto& thread : threads) thread.join();
    CHECK(failures == std::vector<int>(4, 0));
  }

}  // TEST_SUITE

TEST_CASE("[cpu] memory_wrap adopts caller memory; freeing the handle leaves the memory alone") {
  Backend backend(cpu(), {{"devices", "2"}});
  std::vector<unsigned char> data = random_bytes(4096, 7);
  BP_Buffer* wrapped = nullptr;
  BP_REQUIRE_OK(backend.wrap(data.data() + 96, 1000, &wrapped, 1));
  std::vector<unsigned char> read(1000);
  BP_CHECK_OK(backend.to_host(wrapped, 0, read.data(), read.size()));
  CHECK(std::equal(read.begin(), read.end(), data.begin() + 96));
  const std::vector<unsigned char> update(10, 0xAB);
  BP_CHECK_OK(backend.to_device(wrapped, 990, update.data(), update.size()));
  CHECK(data[96 + 995] == 0xAB);
  const PluginStatus past = backend.to_device(wrapped, 991, update.data(), update.size());
  CHECK(past.code() == ErrorCode::kOutOfRange);
  BP_CHECK_OK(backend.free(wrapped));  // a std::free of vector memory here would be caught by ASan
  data.assign(data.size(), 1);         // still ours

  BP_Buffer* refused = nullptr;
  const PluginStatus null_address = backend.wrap(nullptr, 64, &refused);
  CHECK(null_address.code() == ErrorCode::kInvalidArgument);
  CHECK(null_address.message().find("memory_wrap: address is NULL for 64 bytes on cpu:0") != std::string::npos);
  const PluginStatus bad_ordinal = backend.wrap(data.data(), 64, &refused, 2);
  CHECK(bad_ordinal.code() == ErrorCode::kOutOfRange);
  BP_Buffer* empty = nullptr;
  BP_REQUIRE_OK(backend.wrap(nullptr, 0, &empty));
  BP_CHECK_OK(backend.free(empty));
}

}  // namespace backplane::testing
