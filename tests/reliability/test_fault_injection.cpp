// Faults injected through the simulated accelerator (tests/plugins/sim):
// allocation failures at the Nth call, copies failing inside a chunked
// transfer, asynchronous errors reported at completion. Each must end in a
// clear error, leave nothing allocated, and leave the runtime usable.
#include "support/placement_fixture.hpp"

#include <backplane/array.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

using namespace backplane;
using namespace backplane::testing;

namespace {

// Three pinned-staging chunks (8 MiB each) plus an odd tail.
constexpr std::size_t kChunkedSize = (std::size_t{16} << 20) + 4097;

void check_nothing_in_use(Runtime& runtime, const Device& device) {
  CAPTURE(device.selector());
  const MemoryStats stats = memory_stats(runtime, device);
  CHECK(stats.in_use == 0);
  CHECK(stats.pinned_in_use == 0);
}

// The error of `array`'s transfer, if it failed.
std::optional<Error> transfer_error(const Array& array) {
  try {
    array.block_until_ready();
  } catch (const Error& error) {
    return error;
  }
  return std::nullopt;
}

}  // namespace

TEST_CASE("[reliability] a transient failure of the Nth allocation is absorbed by the allocator's retry") {
  // The caching allocator answers an out-of-memory by releasing its cache and
  // retrying once, so a single injected failure (fail_alloc_at) is invisible:
  // every put succeeds with the right data and nothing leaks.
  for (int fail_at = 1; fail_at <= 6; ++fail_at) {
    CAPTURE(fail_at);
    Runtime runtime(placement_options({{"fail_alloc_at", std::to_string(fail_at)}}));
    const auto bytes = random_bytes(kChunkedSize, 5);
    Array source = u8_array(runtime, kCpu0, bytes);
    std::vector<Array> kept;  // kept alive so every put needs a fresh block
    for (int step = 0; step < 6; ++step) {
      // Distinct sizes, some chunked through pinned staging, some not.
      const std::int64_t rows = step % 2 == 0 ? static_cast<std::int64_t>(kChunkedSize) - step : 4096 + step;
      kept.push_back(device_put(runtime, source.slice(0, rows), kSim0));
    }
    for (const Array& array : kept) {
      const auto values = array.to_vector<std::uint8_t>();
      CHECK(std::equal(values.begin(), values.end(), bytes.begin()));
    }
    CHECK(memory_stats(runtime, kSim0).backend_allocations == 6);
    kept.clear();
    check_nothing_in_use(runtime, kSim0);
    empty_cache(runtime, kSim0);
    CHECK(runtime.devices("sim")[0].memory_free == runtime.devices("sim")[0].memory_total);
  }
}

TEST_CASE("[reliability] an allocation failing again on retry makes device_put throw; nothing leaks; it recovers") {
  // The injected failure, then the retry refused by the memory limit.
  Runtime runtime(placement_options({{"fail_alloc_at", "1"}, {"memory_limit", "1048576"}}));
  const auto bytes = random_bytes(2u << 20, 6);
  Array source = u8_array(runtime, kCpu0, bytes);
  const Error error = error_from([&] { device_put(runtime, source, kSim0); });
  CHECK(error.code() == ErrorCode::kOutOfMemory);
  CHECK(contains(error.what(), "out of device memory on sim:0: cannot allocate 2.0 MiB"));
  CHECK(contains(error.what(), "the allocation retried"));
  check_nothing_in_use(runtime, kSim0);
  Array half = device_put(runtime, source.slice(0, 1 << 19), kSim0);
  const auto values = half.to_vector<std::uint8_t>();
  CHECK(std::equal(values.begin(), values.end(), bytes.begin()));
}

TEST_CASE("[reliability] an allocation failing inside take_windows throws; a batch that fits is correct") {
  Runtime runtime(placement_options({{"fail_alloc_at", "1"}, {"memory_limit", "2048"}}));
  std::vector<std::uint16_t> tokens(50000);
  for (std::size_t index = 0; index < tokens.size(); ++index) tokens[index] = static_cast<std::uint16_t>(index * 7);
  Array token_array = Array::from_host(runtime, kCpu0, DType::kU16, {static_cast<std::int64_t>(tokens.size())},
                                       tokens.data(), tokens.size() * 2);
  std::vector<std::int64_t> offsets = {0, 17, 4000, 49000};  // 4 x 65 x 8 = 2080 bytes > 2048
  auto error = error_from([&] { take_windows(runtime, token_array, offsets, 65, kSim0, DType::kI64); });
  CHECK(error.code() == ErrorCode::kOutOfMemory);
  CHECK(contains(error.what(), "sim:0"));
  CHECK(contains(error.what(), "2080 bytes"));
  check_nothing_in_use(runtime, kSim0);

  offsets.resize(2);
  Array batch = take_windows(runtime, token_array, offsets, 65, kSim0, DType::kI64);
  const auto values = batch.to_vector<std::int64_t>();
  REQUIRE(values.size() == offsets.size() * 65);
  for (std::size_t row = 0; row < offsets.size(); ++row) {
    for (std::size_t index = 0; index < 65; ++index) {
      CHECK(values[row * 65 + index] == tokens[static_cast<std::size_t>(offsets[row]) + index]);
    }
  }
  batch = Array();
  check_nothing_in_use(runtime, kSim0);
}

TEST_CASE("[reliability] a copy failing at any point of a chunked round trip names the devices and the size") {
  // Up (cpu:0 -> sim:0), then back down (sim:0 -> cpu:1); the Nth copy of the
  // backend fails, wherever in the chunk sequence it falls.
  const auto bytes = random_bytes(kChunkedSize, 9);
  const std::string size_text = "(" + std::to_string(kChunkedSize) + " bytes)";
  int failed_up = 0;
  int failed_down = 0;
  for (int fail_at = 1; fail_at <= 16; ++fail_at) {
    CAPTURE(fail_at);
    Runtime runtime(placement_options({{"fail_copy_at", std::to_string(fail_at)}}));
    Array source = u8_array(runtime, kCpu0, bytes);
    Array up = device_put(runtime, source, kSim0);
    std::optional<Error> error = transfer_error(up);
    if (error) {
      ++failed_up;
      CHECK(contains(error->what(), "from cpu:0 to sim:0 failed"));
    } else {
      Array down = device_put(runtime, up, kCpu1);
      error = transfer_error(down);
      if (error) {
        ++failed_down;
        CHECK(contains(error->what(), "from sim:0 to cpu:1 failed"));
      } else {
        CHECK(down.to_vector<std::uint8_t>() == bytes);
      }
    }
    if (error) {
      CHECK(error->code() == ErrorCode::kDevice);
      CHECK(contains(error->what(), size_text));
      CHECK(contains(error->what(), "injected device fault"));
    }
    if (!error) break;  // past the last copy of the round trip
    up = Array();
    check_nothing_in_use(runtime, kSim0);
    // Later transfers work: the fault was one copy, not the device.
    Array again = device_put(runtime, device_put(runtime, source, kSim1), kCpu1);
    CHECK(again.to_vector<std::uint8_t>() == bytes);
  }
  CHECK(failed_up >= 3);  // one per chunk at least
  CHECK(failed_down >= 1);
}

TEST_CASE("[reliability] an asynchronous copy error arrives at completion, not at submission, and repeats") {
  Runtime runtime(placement_options({{"fail_copy_at", "1"}, {"copy_delay_us", "20000"}}));
  const auto bytes = random_bytes(4096, 3);
  Array source = u8_array(runtime, kCpu0, bytes);
  Array failing = device_put(runtime, source, kSim0);  // submission succeeds
  Array next = device_put(runtime, source, kSim1);     // queued behind it
  auto error = error_from([&] { failing.block_until_ready(); });
  CHECK(error.code() == ErrorCode::kDevice);
  CHECK(contains(error.what(), "from cpu:0 to sim:0 failed"));
  CHECK(contains(error.what(), "(4096 bytes)"));
  CHECK(contains(error.what(), "injected device fault (fail_copy_at = 1)"));
  CHECK(failing.is_ready());
  CHECK(error_from([&] { failing.block_until_ready(); }).what() == std::string(error.what()));
  CHECK(error_from([&] { failing.to_vector<std::uint8_t>(); }).code() == ErrorCode::kDevice);
  CHECK(next.to_vector<std::uint8_t>() == bytes);

  // A transfer from the failed array is refused with the cause.
  Array dependent = device_put(runtime, failing, kSim1);
  CHECK(contains(error_from([&] { dependent.block_until_ready(); }).what(), "its source array is unusable"));
  failing = Array();
  dependent = Array();
  next = Array();
  check_nothing_in_use(runtime, kSim0);
  check_nothing_in_use(runtime, kSim1);
}
