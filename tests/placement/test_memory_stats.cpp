// memory_stats and reset_peak: the caching allocator's figures, the device's
// total and free memory as its backend reports them, and resetting the peak
// between phases.
#include "support/placement_fixture.hpp"

#include <fstream>
#include <optional>
#include <string>

using namespace backplane;
using namespace backplane::testing;

namespace {

// /proc/meminfo's MemTotal in bytes, or nothing where the file is missing.
std::optional<std::uint64_t> meminfo_total() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  std::uint64_t kib = 0;
  std::string unit;
  while (meminfo >> key >> kib >> unit) {
    if (key == "MemTotal:") return kib * 1024;
  }
  return std::nullopt;
}

}  // namespace

TEST_CASE("[placement] reset_peak brings the peak down to what is in use; later allocations raise it again") {
  Runtime runtime(placement_options());
  const auto bytes = random_bytes(1 << 20);
  Array source = u8_array(runtime, kCpu0, bytes);
  Array kept = device_put(runtime, source.slice(0, 64 << 10), kSim0);
  {
    Array phase = device_put(runtime, source, kSim0);  // the first phase's large batch
    phase.block_until_ready();
  }
  kept.block_until_ready();
  MemoryStats stats = memory_stats(runtime, kSim0);
  CHECK(stats.in_use == 64u << 10);
  CHECK(stats.peak == (1u << 20) + (64u << 10));

  reset_peak(runtime, kSim0);
  stats = memory_stats(runtime, kSim0);
  CHECK(stats.peak == 64u << 10);
  CHECK(stats.in_use == 64u << 10);
  CHECK(stats.cached == 1u << 20);  // the cache is untouched

  Array next = device_put(runtime, source.slice(0, 128 << 10), kSim0);
  next.block_until_ready();
  CHECK(memory_stats(runtime, kSim0).peak == (64u << 10) + (128u << 10));

  kept = Array();
  next = Array();
  reset_peak(runtime, kSim0);
  CHECK(memory_stats(runtime, kSim0).peak == 0);
  // The other device's peak is its own.
  Array elsewhere = device_put(runtime, source.slice(0, 4096), kSim1);
  elsewhere.block_until_ready();
  CHECK(memory_stats(runtime, kSim1).peak == 4096);
  CHECK(memory_stats(runtime, kSim0).peak == 0);
}

TEST_CASE("[placement] memory_stats reports the device's total and a free figure taken at the call") {
  Runtime runtime(placement_options({{"memory_limit", "1048576"}}));
  MemoryStats stats = memory_stats(runtime, kSim0);
  CHECK(stats.memory_total == 1u << 20);
  REQUIRE(stats.memory_free.has_value());
  CHECK(*stats.memory_free == 1u << 20);

  Array source = u8_array(runtime, kCpu0, random_bytes(300 << 10));
  Array placed = device_put(runtime, source, kSim0);
  placed.block_until_ready();
  stats = memory_stats(runtime, kSim0);
  CHECK(stats.memory_total == 1u << 20);
  REQUIRE(stats.memory_free.has_value());
  CHECK(*stats.memory_free == (1u << 20) - (300u << 10));

  // A cached block is still held from the backend.
  placed = Array();
  CHECK(memory_stats(runtime, kSim0).memory_free == (1u << 20) - (300u << 10));
  empty_cache(runtime, kSim0);
  CHECK(memory_stats(runtime, kSim0).memory_free == 1u << 20);
}

TEST_CASE("[placement] memory_stats of cpu reports the host's memory") {
  Runtime runtime(placement_options());
  const MemoryStats stats = memory_stats(runtime, kCpu0);
  if (const auto total = meminfo_total()) CHECK(stats.memory_total == *total);
  CHECK(stats.memory_total > 0);
  REQUIRE(stats.memory_free.has_value());
  CHECK(*stats.memory_free > 0);
  CHECK(*stats.memory_free <= stats.memory_total);
}

TEST_CASE("[placement] a free figure the backend cannot tell reads as unknown") {
  Runtime runtime(placement_options({{"report_free", "0"}, {"memory_limit", "65536"}}));
  const MemoryStats stats = memory_stats(runtime, kSim0);
  CHECK(stats.memory_total == 65536);
  CHECK_FALSE(stats.memory_free.has_value());
  CHECK_FALSE(runtime.devices("sim")[0].memory_free.has_value());
}

TEST_CASE("[placement] memory_stats and reset_peak of a device that does not exist name it") {
  Runtime runtime(placement_options());
  for (const auto& call : {+[](Runtime&r, const Device&d) { (void)memory_stats(r, d); },
                           +[](Runtime&r, const Device&d) { reset_peak(r, d); }}) {
    auto error = error_from([&] { call(runtime, Device{"sim", 5}); });
    CHECK(error.code() == ErrorCode::kOutOfRange);
    CHECK(contains(error.what(), "sim:5"));
    CHECK(contains(error.what(), "sim:0..sim:1"));
    error = error_from([&] { call(runtime, Device{"tpu", 0}); });
    CHECK(error.code() == ErrorCode::kNotFound);
    CHECK(contains(error.what(), "tpu"));
  }
}
