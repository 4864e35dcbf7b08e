// device_put: every direction, views, asynchronous overlap, failures.
#include "support/placement_fixture.hpp"

#include <backplane/plugin.h>

#include <chrono>
#include <cstring>

using namespace backplane;
using namespace backplane::testing;

namespace {

// Small (issued on the caller's thread), just above the inline limit, and
// several staging chunks plus a ragged end.
const std::size_t kSizes[] = {0, 1, 4099, (1u << 20) + 17, (20u << 20) + 5};

void check_round_trip(Runtime& runtime, const Device& from, const Device& to) {
  for (std::size_t size : kSizes) {
    CAPTURE(from.selector());
    CAPTURE(to.selector());
    CAPTURE(size);
    const auto bytes = random_bytes(size, static_cast<std::uint32_t>(size));
    Array source = u8_array(runtime, from, bytes);
    Array moved = device_put(runtime, source, to);
    CHECK(moved.device() == to);
    CHECK_FALSE(moved.same_as(source));
    CHECK(moved.shape() == source.shape());
    moved.block_until_ready();
    CHECK(moved.is_ready());
    CHECK(moved.to_vector<std::uint8_t>() == bytes);
  }
}

}  // namespace

TEST_CASE("[placement] device_put round-trips random data cpu->cpu on another device") {
  Runtime runtime(placement_options());
  check_round_trip(runtime, kCpu0, kCpu1);
  check_round_trip(runtime, kCpu1, Device{"cpu", 3});
}

TEST_CASE("[placement] device_put to the same device returns the same array without allocating") {
  Runtime runtime(placement_options());
  for (const Device& device : {kCpu0, kSim0}) {
    Array source = u8_array(runtime, device, random_bytes(1000));
    const MemoryStats before = memory_stats(runtime, device);
    Array same = device_put(runtime, source, device);
    Array same_again = device_put(source, device);
    CHECK(same.same_as(source));
    CHECK(same_again.same_as(source));
    const MemoryStats after = memory_stats(runtime, device);
    CHECK(after.backend_allocations == before.backend_allocations);
    CHECK(after.in_use == before.in_use);
  }
}

TEST_CASE("[placement] device_put round-trips random data cpu->sim, sim->cpu and sim->sim") {
  Runtime runtime(placement_options());
  check_round_trip(runtime, kCpu0, kSim0);
  check_round_trip(runtime, kSim0, kCpu1);
  check_round_trip(runtime, kSim0, kSim1);
}

TEST_CASE("[placement] chained transfers wait for their source: cpu->sim->sim->cpu without waiting in between") {
  Runtime runtime(placement_options({{"copy_delay_us", "2000"}}));
  const auto bytes = random_bytes((9u << 20) + 3, 11);
  Array on_sim = device_put(runtime, u8_array(runtime, kCpu0, bytes), kSim0);
  Array on_other = device_put(on_sim, kSim1);
  Array back = device_put(on_other, kCpu0);
  CHECK(back.to_vector<std::uint8_t>() == bytes);
}

TEST_CASE("[placement] device_put of views copies just the view's rows") {
  Runtime runtime(placement_options());
  const auto bytes = random_bytes(100 * 8, 5);
  Array matrix = Array::from_host(runtime, kCpu0, DType::kI64, {100, 1}, bytes.data(), bytes.size());
  for (const Device& device : {kCpu1, kSim0}) {
    Array rows = device_put(runtime, matrix.slice(30, 45), device);
    CHECK(rows.shape() == std::vector<std::int64_t>{15, 1});
    CHECK(rows.byte_offset() == 0);
    std::vector<std::uint8_t> out(rows.nbytes());
    rows.copy_to_host(out.data(), out.size());
    CHECK(std::equal(out.begin(), out.end(), bytes.begin() + 240));
    // and back again, from a view of the device copy
    Array back = device_put(runtime, rows.slice(5, 10), kCpu0);
    CHECK(std::memcmp(back.to_vector<std::int64_t>().data(), bytes.data() + 280, 40) == 0);
  }
}

TEST_CASE("[placement] several transfers in flight complete independently and can be awaited out of order") {
  Runtime runtime(placement_options({{"copy_delay_us", "150000"}}));
  std::vector<std::vector<std::uint8_t>> inputs;
  std::vector<Array> arrays;
  for (std::uint32_t index = 0; index < 4; ++index) inputs.push_back(random_bytes(64 << 10, 100 + index));
  for (const auto& input : inputs) arrays.push_back(u8_array(runtime, kCpu0, input));

  const auto start = std::chrono::steady_clock::now();
  std::vector<Array> moved;
  for (const Array& array : arrays) moved.push_back(device_put(runtime, array, kSim0));
  const auto issued = std::chrono::steady_clock::now() - start;
  // The simulated device needs 4 x 150 ms; issuing must not wait for them
  // (the bound leaves room for a loaded test machine).
  CHECK(issued < std::chrono::milliseconds(450));
  CHECK_FALSE(moved.back().is_ready());

  for (std::size_t index = moved.size(); index-- > 0;) {
    moved[index].block_until_ready();
    CHECK(moved[index].to_vector<std::uint8_t>() == inputs[index]);
  }
  for (const Array& array : moved) CHECK(array.is_ready());
}

TEST_CASE("[placement] out of memory on the device names the size and free/total memory; nothing leaks") {
  Runtime runtime(placement_options({{"memory_limit", "1048576"}}));
  const auto big = random_bytes(3 << 20);
  Array source = u8_array(runtime, kCpu0, big);
  auto error = error_from([&] { device_put(runtime, source, kSim0); });
  CHECK(error.code() == ErrorCode::kOutOfMemory);
  CHECK(contains(error.what(), "sim:0"));
  CHECK(contains(error.what(), "3.0 MiB (3145728 bytes)"));
  CHECK(contains(error.what(), "1.0 MiB (1048576 bytes) free of 1.0 MiB (1048576 bytes)"));

  // A cached block that blocks a new allocation is released and the
  // allocation retried.
  {
    Array half = device_put(runtime, source.slice(0, 600 << 10), kSim0);
    half.block_until_ready();
  }
  CHECK(memory_stats(runtime, kSim0).cached == 600u << 10);
  Array larger = device_put(runtime, source.slice(0, 900 << 10), kSim0);
  CHECK(larger.to_vector<std::uint8_t>() == std::vector<std::uint8_t>(big.begin(), big.begin() + (900 << 10)));
  larger = Array();
  const MemoryStats stats = memory_stats(runtime, kSim0);
  CHECK(stats.in_use == 0);
  CHECK(stats.cached == 900u << 10);
  CHECK(stats.pinned_in_use == 0);
  empty_cache(runtime, kSim0);
  CHECK(memory_stats(runtime, kSim0).cached == 0);
  CHECK(runtime.devices("sim")[0].memory_free == 1u << 20);
}

TEST_CASE("[placement] a copy failing in the middle of a chunked transfer surfaces at block_until_ready") {
  // Copies 1 and 2 carry chunks 1 and 2 of the first transfer; copy 3 fails.
  Runtime runtime(placement_options({{"fail_copy_at", "3"}}));
  const std::size_t size = (40u << 20) + 9;
  const auto bytes = random_bytes(size, 21);
  Array source = u8_array(runtime, kCpu0, bytes);
  Array moved = device_put(runtime, source, kSim0);
  auto error = error_from([&] { moved.block_until_ready(); });
  CHECK(error.code() == ErrorCode::kDevice);
  CHECK(contains(error.what(), "device_put of 40.0 MiB (41943049 bytes) from cpu:0 to sim:0 failed"));
  CHECK(contains(error.what(), "injected device fault"));
  CHECK(moved.is_ready());
  CHECK(error_from([&] { moved.to_vector<std::uint8_t>(); }).code() == ErrorCode::kDevice);

  // A transfer reading the failed array fails the same way, naming why.
  Array dependent = device_put(runtime, moved, kCpu1);
  error = error_from([&] { dependent.block_until_ready(); });
  CHECK(contains(error.what(), "its source array is unusable"));

  // Nothing is left in use, and the runtime still works.
  moved = Array();
  dependent = Array();
  CHECK(memory_stats(runtime, kSim0).in_use == 0);
  CHECK(memory_stats(runtime, kSim0).pinned_in_use == 0);
  Array again = device_put(runtime, source, kSim0);
  CHECK(again.to_vector<std::uint8_t>() == bytes);
}

TEST_CASE("[placement] progress reports grow to the total") {
  Runtime runtime(placement_options());
  const auto bytes = random_bytes((17u << 20) + 1, 8);
  Array source = u8_array(runtime, kCpu0, bytes);
  std::vector<std::uint64_t> reports;
  std::uint64_t total = 0;
  PutOptions options;
  options.progress = [&](std::uint64_t done, std::uint64_t all) {
    reports.push_back(done);
    total = all;
  };
  Array moved = device_put(runtime, source, kSim0, options);
  moved.block_until_ready();
  REQUIRE(reports.size() == 3);  // three 8 MiB chunks
  CHECK(std::is_sorted(reports.begin(), reports.end()));
  CHECK(reports.back() == bytes.size());
  CHECK(total == bytes.size());
  CHECK(moved.to_vector<std::uint8_t>() == bytes);
}

TEST_CASE("[placement] an empty device_put with progress reports (0, 0) and stages nothing") {
  Runtime runtime(placement_options());
  Array source = u8_array(runtime, kCpu0, {});
  std::vector<std::pair<std::uint64_t, std::uint64_t>> reports;
  PutOptions options;
  options.progress = [&](std::uint64_t done, std::uint64_t all) { reports.emplace_back(done, all); };
  Array moved = device_put(runtime, source, kSim0, options);
  moved.block_until_ready();
  CHECK(reports == std::vector<std::pair<std::uint64_t, std::uint64_t>>{{0, 0}});
  const MemoryStats stats = memory_stats(runtime, kSim0);
  CHECK(stats.pinned_backend_allocations == 0);
  CHECK(stats.pinned_cached == 0);
}

TEST_CASE("[placement] device_put to an unknown device is an error naming the backends") {
  Runtime runtime(placement_options());
  Array source = u8_array(runtime, kCpu0, random_bytes(8));
  auto error = error_from([&] { device_put(runtime, source, Device{"cpu", 9}); });
  CHECK(error.code() == ErrorCode::kOutOfRange);
  CHECK(contains(error.what(), "cpu:0..cpu:3"));
  error = error_from([&] { device_put(runtime, source, Device{"tpu", 0}); });
  CHECK(error.code() == ErrorCode::kNotFound);
  CHECK(contains(error.what(), "sim (available)"));
}

TEST_CASE("[placement] a backend stating BP_CAPABILITY_NO_DEVICE_TO_DEVICE gets its copies through host memory") {
  // The simulator's probe then states the bit, and its device-to-device
  // copies fail: a transfer that called one would fail.
  Runtime runtime(placement_options({{"no_device_to_device", "1"}}));
  const BackendInfo* sim = runtime.find_backend("sim");
  REQUIRE(sim != nullptr);
  CHECK((sim->capabilities & BP_CAPABILITY_NO_DEVICE_TO_DEVICE) != 0);
  check_round_trip(runtime, kSim0, kSim1);
  check_round_trip(runtime, kCpu0, kSim0);
  const auto bytes = random_bytes(4096, 5);
  Array on_sim = u8_array(runtime, kSim1, bytes);
  Array view = on_sim.slice(1000, 3000);
  Array moved = device_put(runtime, view, kSim0);
  CHECK(moved.to_vector<std::uint8_t>() == std::vector<std::uint8_t>(bytes.begin() + 1000, bytes.begin() + 3000));
}
