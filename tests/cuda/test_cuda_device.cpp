// The cuda backend on a GPU: memory, copies, events, the widening kernel,
// and the out-of-memory message. Each case says "skipped: no CUDA device
// (<probe reason>)" and returns where there is no device, so a run on a
// machine without a GPU passes them without claiming to have tested them.
#include "cuda_plugin_fixture.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

using backplane::testing::api;
using backplane::testing::Backend;
using backplane::testing::PluginStatus;
using backplane::testing::take;

namespace {

bool have_device(const Backend& backend) {
  if (backend.device_count() > 0) return true;
  MESSAGE("skipped: no CUDA device (" << backend.reason() << ")");
  return false;
}

struct Allocation {
  BP_Buffer* buffer = nullptr;
  void* address = nullptr;
};

Allocation allocate(const Backend& backend, uint64_t size, BP_MemoryKind kind = BP_MEMORY_DEVICE, int32_t ordinal = 0) {
  auto args = backplane::detail::memory_allocate_args(backend.handle(), ordinal, kind, size);
  const PluginStatus outcome = take(api().memory_allocate(&args));
  REQUIRE_MESSAGE(outcome.ok(), outcome.message());
  REQUIRE(args.buffer != nullptr);
  return {args.buffer, args.address};
}

void release(const Backend& backend, BP_Buffer* buffer) {
  auto args = backplane::detail::memory_free_args(backend.handle(), buffer);
  const PluginStatus outcome = take(api().memory_free(&args));
  CHECK_MESSAGE(outcome.ok(), outcome.message());
}

std::vector<unsigned char> random_bytes(std::size_t size, uint64_t seed) {
  std::mt19937_64 generator(seed);
  std::vector<unsigned char> bytes(size);
  for (auto& byte : bytes) byte = static_cast<unsigned char>(generator());
  return bytes;
}

void wait_and_destroy(const Backend& backend, BP_Event* event) {
  REQUIRE(event != nullptr);
  auto args = backplane::detail::event_args(backend.handle(), event);
  const PluginStatus waited = take(api().event_wait(&args));
  CHECK_MESSAGE(waited.ok(), waited.message());
  REQUIRE(take(api().event_query(&args)).ok());
  CHECK(args.done == 1);
  api().event_destroy(backend.handle(), event);
}

PluginStatus upload(const Backend& backend, BP_Buffer* buffer, uint64_t offset, const void* data, uint64_t size) {
  auto args = backplane::detail::copy_to_device_args(backend.handle(), buffer, offset, data, size);
  return take(api().copy_to_device(&args));
}

PluginStatus download(const Backend& backend, BP_Buffer* buffer, uint64_t offset, void* data, uint64_t size) {
  auto args = backplane::detail::copy_to_host_args(backend.handle(), buffer, offset, data, size);
  return take(api().copy_to_host(&args));
}

}  // namespace

TEST_CASE("[cuda][gpu] device info: name, memory and attributes") {
  Backend backend;
  if (!have_device(backend)) return;
  for (int ordinal = 0; ordinal < backend.device_count(); ++ordinal) {
    auto info = backplane::detail::device_info_args(backend.handle(), ordinal);
    const PluginStatus outcome = take(api().device_info(&info));
    REQUIRE_MESSAGE(outcome.ok(), outcome.message());
    CHECK(info.name_size > 0);
    CHECK(info.kind == BP_DEVICE_KIND_GPU);
    CHECK(info.memory_total > 0);
    // Unknown until the device is used here: asking would create a context.
    CHECK((info.memory_free == BP_MEMORY_FREE_UNKNOWN || info.memory_free <= info.memory_total));
    std::vector<std::string> keys;
    for (size_t index = 0; index < info.attribute_count; ++index) {
      const BP_KeyValue& attribute = info.attributes[index];
      const std::string key(attribute.key, attribute.key_size);
      const std::string value(attribute.value, attribute.value_size);
      MESSAGE("cuda:" << ordinal << " " << key << " = " << value);
      keys.push_back(key);
      CHECK_FALSE(value.empty());
      if (key == "uuid") CHECK(value.rfind("GPU-", 0) == 0);
    }
    CHECK(keys == std::vector<std::string>{"compute_capability", "multiprocessor_count", "pci_bus_id", "uuid"});
  }
  auto beyond = backplane::detail::device_info_args(backend.handle(), backend.device_count());
  CHECK(take(api().device_info(&beyond)).code() == backplane::ErrorCode::kOutOfRange);
}

TEST_CASE("[cuda][gpu] synchronous round trip of random data, bounds checked") {
  Backend backend;
  if (!have_device(backend)) return;
  const uint64_t size = (3u << 20) + 7;
  const Allocation device = allocate(backend, size);
  CHECK(device.address != nullptr);  // the device pointer
  const auto sent = random_bytes(size, 1);
  REQUIRE(upload(backend, device.buffer, 0, sent.data(), size).ok());
  std::vector<unsigned char> received(size);
  REQUIRE(download(backend, device.buffer, 0, received.data(), size).ok());
  CHECK(received == sent);

  // A sub-range at an odd offset.
  const auto patch = random_bytes(1000, 2);
  REQUIRE(upload(backend, device.buffer, 12345, patch.data(), patch.size()).ok());
  std::vector<unsigned char> back(patch.size());
  REQUIRE(download(backend, device.buffer, 12345, back.data(), back.size()).ok());
  CHECK(back == patch);

  CHECK(upload(backend, device.buffer, size - 10, patch.data(), 11).code() == backplane::ErrorCode::kOutOfRange);
  CHECK(download(backend, device.buffer, size + 1, back.data(), 0).code() == backplane::ErrorCode::kOutOfRange);
  CHECK(upload(backend, device.buffer, 1, patch.data(), std::numeric_limits<uint64_t>::max()).code() ==
        backplane::ErrorCode::kOutOfRange);
  CHECK(upload(backend, device.buffer, 0, nullptr, 1).code() == backplane::ErrorCode::kInvalidArgument);
  CHECK(upload(backend, device.buffer, size, nullptr, 0).ok());
  release(backend, device.buffer);

  // A freed handle is no longer accepted.
  CHECK(upload(backend, device.buffer, 0, sent.data(), 1).code() == backplane::ErrorCode::kInvalidArgument);
  auto again = backplane::detail::memory_free_args(backend.handle(), device.buffer);
  CHECK(take(api().memory_free(&again)).code() == backplane::ErrorCode::kInvalidArgument);
}

TEST_CASE("[cuda][gpu] memory_wrap adopts device memory inside one allocation, and only that") {
  Backend backend;
  if (!have_device(backend)) return;
  const uint64_t size = 1u << 20;
  const Allocation home = allocate(backend, size);
  const auto sent = random_bytes(size, 3);
  REQUIRE(upload(backend, home.buffer, 0, sent.data(), size).ok());
  auto* base = static_cast<unsigned char*>(home.address);

  auto wrap = backplane::detail::memory_wrap_args(backend.handle(), 0, base + 4096, size - 4096);
  const PluginStatus wrapped = take(api().memory_wrap(&wrap));
  REQUIRE_MESSAGE(wrapped.ok(), wrapped.message());
  std::vector<unsigned char> back(size - 4096);
  REQUIRE(download(backend, wrap.buffer, 0, back.data(), back.size()).ok());
  CHECK(std::memcmp(back.data(), sent.data() + 4096, back.size()) == 0);
  release(backend, wrap.buffer);  // the handle only: the allocation still reads back
  std::vector<unsigned char> all(size);
  REQUIRE(download(backend, home.buffer, 0, all.data(), size).ok());
  CHECK(all == sent);

  auto past = backplane::detail::memory_wrap_args(backend.handle(), 0, base + size - 16, 32);
  const PluginStatus past_end = take(api().memory_wrap(&past));
  CHECK(past_end.code() == backplane::ErrorCode::kOutOfRange);
  CHECK(past_end.message().find("runs past the end of its") != std::string::npos);

  std::vector<unsigned char> host(64);
  auto pageable = backplane::detail::memory_wrap_args(backend.handle(), 0, host.data(), host.size());
  const PluginStatus not_device = take(api().memory_wrap(&pageable));
  CHECK(not_device.code() == backplane::ErrorCode::kInvalidArgument);
  CHECK(not_device.message().find("not memory the CUDA driver knows") != std::string::npos);

  const Allocation pinned = allocate(backend, 4096, BP_MEMORY_PINNED_HOST);
  auto host_wrap = backplane::detail::memory_wrap_args(backend.handle(), 0, pinned.address, 4096);
  const PluginStatus pinned_refused = take(api().memory_wrap(&host_wrap));
  CHECK(pinned_refused.code() == backplane::ErrorCode::kInvalidArgument);
  CHECK(pinned_refused.message().find("the address is host memory, not device memory") != std::string::npos);
  release(backend, pinned.buffer);

  if (backend.device_count() > 1) {
    auto other = backplane::detail::memory_wrap_args(backend.handle(), 1, base, 64);
    const PluginStatus wrong_device = take(api().memory_wrap(&other));
    CHECK(wrong_device.code() == backplane::ErrorCode::kInvalidArgument);
    CHECK(wrong_device.message().find("the address is memory of cuda:0") != std::string::npos);
  }
  release(backend, home.buffer);
}

namespace {

// The few driver calls a producer such as PyTorch makes, declared by hand:
// the test links neither libcuda nor cuda.h.
struct ProducerDriver {
  using RetainFn = int (*)(void**, int);
  using PushFn = int (*)(void*);
  using PopFn = int (*)(void**);
  using MemsetFn = int (*)(unsigned long long, unsigned int, std::size_t, void*);
  using ReleaseFn = int (*)(int);
  void* library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  RetainFn retain = library ? reinterpret_cast<RetainFn>(dlsym(library, "cuDevicePrimaryCtxRetain")) : nullptr;
  PushFn push = library ? reinterpret_cast<PushFn>(dlsym(library, "cuCtxPushCurrent_v2")) : nullptr;
  PopFn pop = library ? reinterpret_cast<PopFn>(dlsym(library, "cuCtxPopCurrent_v2")) : nullptr;
  MemsetFn memset_async = library ? reinterpret_cast<MemsetFn>(dlsym(library, "cuMemsetD32Async")) : nullptr;
  ReleaseFn release = library ? reinterpret_cast<ReleaseFn>(dlsym(library, "cuDevicePrimaryCtxRelease_v2")) : nullptr;
};

}  // namespace

TEST_CASE("[cuda][gpu] memory_wrap orders later work after the legacy default stream") {
  Backend backend;
  if (!have_device(backend)) return;
  ProducerDriver driver;
  REQUIRE((driver.retain && driver.push && driver.pop && driver.memset_async && driver.release));
  const uint64_t words = 64u << 20;  // 256 MiB
  const Allocation home = allocate(backend, words * 4);
  void* context = nullptr;
  REQUIRE(driver.retain(&context, 0) == 0);
  REQUIRE(driver.push(context) == 0);
  // A producer's writes, queued on the legacy default stream (handle 1) and
  // still running when the memory is wrapped: many passes, the last one wins.
  void* const legacy_stream = reinterpret_cast<void*>(1);
  const auto address = reinterpret_cast<unsigned long long>(home.address);
  for (unsigned int pass = 0; pass < 32; ++pass) {
    REQUIRE(driver.memset_async(address, pass == 31 ? 0xA5A5A5A5u : pass, words, legacy_stream) == 0);
  }
  auto wrap = backplane::detail::memory_wrap_args(backend.handle(), 0, home.address, words * 4);
  const PluginStatus wrapped = take(api().memory_wrap(&wrap));
  REQUIRE_MESSAGE(wrapped.ok(), wrapped.message());
  std::vector<uint32_t> back(words);
  REQUIRE(download(backend, wrap.buffer, 0, back.data(), words * 4).ok());
  const auto stale = std::count_if(back.begin(), back.end(), [](uint32_t word) { return word != 0xA5A5A5A5u; });
  CHECK_MESSAGE(stale == 0, stale << " words were read before the producer's last write");
  void* popped = nullptr;
  driver.pop(&popped);
  driver.release(0);
  release(backend, wrap.buffer);
  release(backend, home.buffer);
}

TEST_CASE("[cuda][gpu] asynchronous round trip through pinned memory") {
  Backend backend;
  if (!have_device(backend)) return;
  const uint64_t size = 8u << 20;
  const Allocation device = allocate(backend, size);
  const Allocation pinned_out = allocate(backend, size, BP_MEMORY_PINNED_HOST);
  const Allocation pinned_in = allocate(backend, size, BP_MEMORY_PINNED_HOST);
  REQUIRE(pinned_out.address != nullptr);
  REQUIRE(pinned_in.address != nullptr);
  const auto sent = random_bytes(size, 3);
  std::memcpy(pinned_out.address, sent.data(), size);
  std::memset(pinned_in.address, 0, size);

  auto up = backplane::detail::copy_to_device_args(backend.handle(), device.buffer, 0, pinned_out.address, size);
  REQUIRE(take(api().copy_to_device_async(&up)).ok());
  // Same device, same stream: the download is ordered after the upload.
  auto down = backplane::detail::copy_to_host_args(backend.handle(), device.buffer, 0, pinned_in.address, size);
  REQUIRE(take(api().copy_to_host_async(&down)).ok());
  wait_and_destroy(backend, down.event);
  wait_and_destroy(backend, up.event);
  CHECK(std::memcmp(pinned_in.address, sent.data(), size) == 0);

  // Pageable memory works asynchronously too.
  std::vector<unsigned char> pageable(size);
  auto pageable_down = backplane::detail::copy_to_host_args(backend.handle(), device.buffer, 0, pageable.data(), size);
  REQUIRE(take(api().copy_to_host_async(&pageable_down)).ok());
  wait_and_destroy(backend, pageable_down.event);
  CHECK(pageable == sent);

  // Size zero still yields an event.
  auto empty = backplane::detail::copy_to_device_args(backend.handle(), device.buffer, size, nullptr, 0);
  REQUIRE(take(api().copy_to_device_async(&empty)).ok());
  wait_and_destroy(backend, empty.event);

  release(backend, pinned_in.buffer);
  release(backend, pinned_out.buffer);
  release(backend, device.buffer);
}

TEST_CASE("[cuda][gpu] device to device, on one device and between devices") {
  Backend backend;
  if (!have_device(backend)) return;
  const uint64_t size = 5u << 20;
  const auto sent = random_bytes(size, 4);
  const Allocation first = allocate(backend, size);
  REQUIRE(upload(backend, first.buffer, 0, sent.data(), size).ok());

  const int last = backend.device_count() - 1;
  for (int ordinal : {0, last}) {
    CAPTURE(ordinal);
    const Allocation second = allocate(backend, size + 64, BP_MEMORY_DEVICE, ordinal);
    auto sync =
        backplane::detail::copy_device_to_device_args(backend.handle(), first.buffer, 0, second.buffer, 64, size);
    const PluginStatus copied = take(api().copy_device_to_device(&sync));
    REQUIRE_MESSAGE(copied.ok(), copied.message());
    std::vector<unsigned char> received(size);
    REQUIRE(download(backend, second.buffer, 64, received.data(), size).ok());
    CHECK(received == sent);

    auto async = backplane::detail::copy_device_to_device_args(backend.handle(), second.buffer, 64 + 100, second.buffer,
                                                               0, 4096);
    REQUIRE(take(api().copy_device_to_device_async(&async)).ok());
    wait_and_destroy(backend, async.event);
    std::vector<unsigned char> head(4096);
    REQUIRE(download(backend, second.buffer, 0, head.data(), head.size()).ok());
    CHECK(std::memcmp(head.data(), sent.data() + 100, head.size()) == 0);

    auto too_far =
        backplane::detail::copy_device_to_device_args(backend.handle(), first.buffer, 1, second.buffer, 0, size);
    CHECK(take(api().copy_device_to_device(&too_far)).code() == backplane::ErrorCode::kOutOfRange);
    release(backend, second.buffer);
  }
  if (last == 0) MESSAGE("one device: the cross-device copy ran on cuda:0 only");
  release(backend, first.buffer);
}

TEST_CASE("[cuda][gpu] convert_integers widens unsigned integers on the device") {
  Backend backend;
  if (!have_device(backend)) return;
  const uint64_t count = 1'000'003;  // not a multiple of the block size
  std::mt19937_64 generator(5);

  auto widen = [&](BP_IntegerType from, uint64_t from_size, BP_IntegerType to, uint64_t to_size, auto source_value,
                   auto destination_value) {
    using Source = decltype(source_value);
    using Destination = decltype(destination_value);
    std::vector<Source> values(count);
    for (auto& value : values) value = static_cast<Source>(generator());
    values[0] = std::numeric_limits<Source>::max();
    values[1] = 0;
    const Allocation source = allocate(backend, count * from_size + 16);
    const Allocation destination = allocate(backend, count * to_size + 16);
    REQUIRE(upload(backend, source.buffer, from_size, values.data(), count * from_size).ok());
    auto args = backplane::detail::convert_integers_args(backend.handle(), source.buffer, from_size, from,
                                                         destination.buffer, to_size, to, count);
    const PluginStatus converted = take(api().convert_integers(&args));
    if (backplane::testing::on_emulator()) {  // no kernel runs there: the plugin says so, up front
      CHECK(converted.code() == backplane::ErrorCode::kUnsupported);
      CHECK(converted.message().rfind("convert_integers: the widening kernel cannot run on cuda:0 "
                                      "(cudaFuncGetAttributes: ",
                                      0) == 0);
      CHECK(converted.message().find("); widen on the host instead") != std::string::npos);
      CHECK(args.event == nullptr);
      release(backend, source.buffer);
      release(backend, destination.buffer);
      return;
    }
    REQUIRE_MESSAGE(converted.ok(), converted.message());
    wait_and_destroy(backend, args.event);
    std::vector<Destination> result(count);
    REQUIRE(download(backend, destination.buffer, to_size, result.data(), count * to_size).ok());
    bool all_equal = true;
    for (uint64_t index = 0; index < count; ++index) {
      all_equal = all_equal && result[index] == static_cast<Destination>(values[index]);
    }
    CHECK(all_equal);
    CHECK(result[0] == static_cast<Destination>(std::numeric_limits<Source>::max()));
    release(backend, source.buffer);
    release(backend, destination.buffer);
  };
  SUBCASE("U16 -> I64") { widen(BP_INTEGER_U16, 2, BP_INTEGER_I64, 8, uint16_t{}, int64_t{}); }
  SUBCASE("U16 -> I32") { widen(BP_INTEGER_U16, 2, BP_INTEGER_I32, 4, uint16_t{}, int32_t{}); }
  SUBCASE("U8 -> I32") { widen(BP_INTEGER_U8, 1, BP_INTEGER_I32, 4, uint8_t{}, int32_t{}); }
  SUBCASE("U32 -> I64") { widen(BP_INTEGER_U32, 4, BP_INTEGER_I64, 8, uint32_t{}, int64_t{}); }

  SUBCASE("refusals") {
    const Allocation buffer = allocate(backend, 4096);
    auto args = backplane::detail::convert_integers_args(backend.handle(), buffer.buffer, 0, BP_INTEGER_U32,
                                                         buffer.buffer, 2048, BP_INTEGER_I32, 16);
    PluginStatus outcome = take(api().convert_integers(&args));
    CHECK(outcome.code() == backplane::ErrorCode::kInvalidArgument);
    CHECK(outcome.message().find("cannot widen U32 to I32") != std::string::npos);
    args.source_type = BP_INTEGER_U16;
    args.destination_type = BP_INTEGER_I64;
    args.destination_offset = 2049;  // misaligned
    CHECK(take(api().convert_integers(&args)).code() == backplane::ErrorCode::kInvalidArgument);
    args.destination_offset = 8;  // overlaps the source
    CHECK(take(api().convert_integers(&args)).code() == backplane::ErrorCode::kInvalidArgument);
    args.destination_offset = 2048;
    args.count = 1000;  // 8000 bytes do not fit
    CHECK(take(api().convert_integers(&args)).code() == backplane::ErrorCode::kOutOfRange);
    CHECK(args.event == nullptr);
    release(backend, buffer.buffer);
  }
}

TEST_CASE("[cuda][gpu] out of device memory names the size and the free memory") {
  Backend backend;
  if (!have_device(backend)) return;
  auto info = backplane::detail::device_info_args(backend.handle(), 0);
  REQUIRE(take(api().device_info(&info)).ok());
  auto args = backplane::detail::memory_allocate_args(backend.handle(), 0, BP_MEMORY_DEVICE, info.memory_total * 2);
  const PluginStatus outcome = take(api().memory_allocate(&args));
  MESSAGE(outcome.message());
  CHECK(outcome.code() == backplane::ErrorCode::kOutOfMemory);
  CHECK(outcome.message().rfind("cuMemAlloc of ", 0) == 0);
  CHECK(outcome.message().find(" GiB on cuda:0 failed: CUDA_ERROR_OUT_OF_MEMORY: ") != std::string::npos);
  CHECK(outcome.message().find("(free ") != std::string::npos);
  CHECK(args.buffer == nullptr);
  // Nothing leaked: a normal allocation still works.
  release(backend, allocate(backend, 1 << 20).buffer);
}

TEST_CASE("[cuda][gpu] destroying a backend releases what it still holds") {
  Backend* backend = new Backend;
  if (!have_device(*backend)) {
    delete backend;
    return;
  }
  const Allocation device = allocate(*backend, 1 << 20);
  allocate(*backend, 1 << 20, BP_MEMORY_PINNED_HOST);
  std::vector<unsigned char> data(1 << 20, 7);
  auto up = backplane::detail::copy_to_device_args(backend->handle(), device.buffer, 0, data.data(), data.size());
  REQUIRE(take(api().copy_to_device_async(&up)).ok());
  delete backend;  // buffers, the pending event, stream and context go with it
}
