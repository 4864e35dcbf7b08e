// take_windows: the batch sampler, its bounds, conversion and allocations.
#include "placement_fixture.hpp"

#include <cstring>

using namespace backplane;
using namespace backplane::testing;

namespace {

std::vector<std::uint16_t> random_tokens(std::size_t count, std::uint32_t seed = 1) {
  std::mt19937 engine(seed);
  std::uniform_int_distribution<int> token(1, 65535);
  std::vector<std::uint16_t> tokens(count);
  for (auto& value : tokens) value = static_cast<std::uint16_t>(token(engine));
  return tokens;
}

Array tokens_array(Runtime& runtime, const std::vector<std::uint16_t>& tokens) {
  return Array::from_host(runtime, kCpu0, DType::kU16, {static_cast<std::int64_t>(tokens.size())}, tokens.data(),
                          tokens.size() * 2);
}

template <class T>
std::vector<T> expected_windows(const std::vector<std::uint16_t>& tokens, const std::vector<std::int64_t>& offsets,
                                std::int64_t length) {
  std::vector<T> out;
  for (std::int64_t offset : offsets) {
    for (std::int64_t index = 0; index < length; ++index) out.push_back(static_cast<T>(tokens[offset + index]));
  }
  return out;
}

}  // namespace

TEST_CASE("[placement] take_windows gathers [B, length] windows onto cpu and sim devices") {
  Runtime runtime(placement_options());
  const auto tokens = random_tokens(10000);
  Array source = tokens_array(runtime, tokens);
  const std::vector<std::int64_t> offsets = {0, 17, 9935, 4000, 17, 5000};
  for (const Device& device : {kCpu0, kCpu1, kSim0, kSim1}) {
    CAPTURE(device.selector());
    Array batch = take_windows(runtime, source, offsets, 65, device);
    CHECK(batch.device() == device);
    CHECK(batch.dtype() == DType::kU16);
    CHECK(batch.shape() == std::vector<std::int64_t>{6, 65});
    CHECK(batch.to_vector<std::uint16_t>() == expected_windows<std::uint16_t>(tokens, offsets, 65));
  }
}

TEST_CASE("[placement] take_windows widens U16 tokens to I64 on any device") {
  Runtime runtime(placement_options());
  const auto tokens = random_tokens(3000, 2);
  Array source = tokens_array(runtime, tokens);
  const std::vector<std::int64_t> offsets = {5, 2000, 100};
  for (const Device& device : {kCpu1, kSim0}) {
    CAPTURE(device.selector());
    Array batch = take_windows(runtime, source, offsets, 129, device, DType::kI64);
    CHECK(batch.dtype() == DType::kI64);
    CHECK(batch.nbytes() == 3 * 129 * 8);
    CHECK(batch.to_vector<std::int64_t>() == expected_windows<std::int64_t>(tokens, offsets, 129));
  }
  auto error = error_from([&] { take_windows(runtime, source, offsets, 4, kCpu0, DType::kF32); });
  CHECK(error.code() == ErrorCode::kUnsupported);
  CHECK(contains(error.what(), "cannot convert U16 to F32"));
}

TEST_CASE("[placement] take_windows works from views and wrapped memory, and with no windows") {
  Runtime runtime(placement_options());
  auto tokens = std::make_shared<std::vector<std::uint16_t>>(random_tokens(5000, 3));
  Array wrapped = Array::wrap_host(runtime, kCpu0, DType::kU16, {5000}, tokens->data(), tokens);
  Array tail = wrapped.slice(1000, 5000);
  const std::vector<std::int64_t> offsets = {0, 3990};
  std::vector<std::int64_t> shifted = {1000, 4990};
  Array batch = take_windows(tail, offsets, 10, kSim0);
  CHECK(batch.to_vector<std::uint16_t>() == expected_windows<std::uint16_t>(*tokens, shifted, 10));
  Array empty = take_windows(wrapped, std::span<const std::int64_t>(), 10, kSim0);
  CHECK(empty.shape() == std::vector<std::int64_t>{0, 10});
  CHECK(empty.to_vector<std::uint16_t>().empty());
}

TEST_CASE("[placement] take_windows bounds errors name the offending offset and the array length") {
  Runtime runtime(placement_options());
  Array source = tokens_array(runtime, random_tokens(1000));
  const std::vector<std::int64_t> past_end = {0, 10, 936, 3};
  auto error = error_from([&] { take_windows(runtime, source, past_end, 65, kCpu0); });
  CHECK(error.code() == ErrorCode::kOutOfRange);
  CHECK(contains(error.what(), "window 2 at offset 936 with length 65"));
  CHECK(contains(error.what(), "1000 elements"));
  CHECK(contains(error.what(), "0..935"));
  const std::vector<std::int64_t> negative = {-1};
  error = error_from([&] { take_windows(runtime, source, negative, 1, kSim0); });
  CHECK(contains(error.what(), "offset -1"));
  const std::vector<std::int64_t> fine = {0};
  error = error_from([&] { take_windows(runtime, source, fine, 1001, kCpu0); });
  CHECK(contains(error.what(), "length 1001"));
  // Nothing was allocated for the refused batches.
  CHECK(memory_stats(runtime, kSim0).backend_allocations == 0);
}

TEST_CASE("[placement] take_windows needs 1-D host tokens") {
  Runtime runtime(placement_options());
  const auto tokens = random_tokens(100);
  Array on_sim = Array::from_host(runtime, kSim0, DType::kU16, {100}, tokens.data(), 200);
  const std::vector<std::int64_t> offsets = {0};
  auto error = error_from([&] { take_windows(runtime, on_sim, offsets, 4, kCpu0); });
  CHECK(error.code() == ErrorCode::kUnsupported);
  CHECK(contains(error.what(), "sim:0, which is not host memory"));
  Array matrix = Array::from_host(runtime, kCpu0, DType::kU16, {10, 10}, tokens.data(), 200);
  error = error_from([&] { take_windows(runtime, matrix, offsets, 4, kCpu0); });
  CHECK(contains(error.what(), "must be 1-D, got shape [10, 10]"));
}

TEST_CASE("[placement] 100 take_windows steps in steady state call the backend allocator zero times") {
  Runtime runtime(placement_options());
  const auto tokens = random_tokens(1 << 16);
  Array source = tokens_array(runtime, tokens);
  std::mt19937 engine(5);
  std::uniform_int_distribution<std::int64_t> pick(0, (1 << 16) - 257);
  std::vector<std::int64_t> offsets(16);
  auto next_batch = [&](const Device& device) {
    for (auto& offset : offsets) offset = pick(engine);
    return take_windows(runtime, source, offsets, 257, device, DType::kI64);
  };
  for (const Device& device : {kSim0, kCpu1}) {
    CAPTURE(device.selector());
    // The prefetching loop of docs/placement.md: batch k+1 is placed while
    // batch k is used, so two batches are alive at a time.
    Array batch = next_batch(device);
    for (int step = 0; step < 3; ++step) {
      Array prefetched = next_batch(device);
      batch.block_until_ready();
      batch = prefetched;
    }
    const MemoryStats before = memory_stats(runtime, device);
    for (int step = 0; step < 100; ++step) {
      const auto expected = expected_windows<std::int64_t>(tokens, offsets, 257);
      Array prefetched = next_batch(device);
      CHECK(batch.to_vector<std::int64_t>().size() == expected.size());
      batch = prefetched;
      if (step % 25 == 0) CHECK(prefetched.to_vector<std::int64_t>() == expected_windows<std::int64_t>(tokens, offsets, 257));
    }
    const MemoryStats after = memory_stats(runtime, device);
    CHECK(after.backend_allocations == before.backend_allocations);
    CHECK(after.pinned_backend_allocations == before.pinned_backend_allocations);
    CHECK(after.peak == before.peak);
  }
}
