// take_windows: the batch sampler, its bounds, conversion and allocations.
#include "support/placement_fixture.hpp"

#include <cstring>
#include <limits>
#include <memory>
#include <type_traits>
#include <utility>

#include <fmt/format.h>

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
      if (step % 25 == 0)
        CHECK(prefetched.to_vector<std::int64_t>() == expected_windows<std::int64_t>(tokens, offsets, 257));
    }
    const MemoryStats after = memory_stats(runtime, device);
    CHECK(after.backend_allocations == before.backend_allocations);
    CHECK(after.pinned_backend_allocations == before.pinned_backend_allocations);
    CHECK(after.peak == before.peak);
  }
}

TEST_CASE("[placement] a small take_windows batch reaches the device the way a device_put of its size does") {
  Runtime runtime(placement_options());
  const auto tokens = random_tokens(10000, 7);
  Array source = tokens_array(runtime, tokens);
  const std::vector<std::int64_t> offsets = {3, 900, 4500, 7000, 12, 9000, 2500, 640};
  const std::uint64_t batch_bytes = offsets.size() * 257 * 2;
  {
    Array batch = take_windows(runtime, source, offsets, 257, kSim0);
    CHECK(batch.to_vector<std::uint16_t>() == expected_windows<std::uint16_t>(tokens, offsets, 257));
  }
  // The batch crossed from one pinned staging block of its size, back in the
  // device's staging cache now.
  const MemoryStats after_batch = memory_stats(runtime, kSim0);
  CHECK(after_batch.pinned_backend_allocations == 1);
  CHECK(after_batch.pinned_in_use == 0);
  CHECK(after_batch.pinned_cached >= batch_bytes);
  CHECK(after_batch.pinned_cached < 2 * batch_bytes);

  // device_put of as many bytes stages them the same way: in that same block,
  // into the batch's old device block.
  const auto bytes = random_bytes(batch_bytes, 8);
  Array put = device_put(runtime, u8_array(runtime, kCpu0, bytes), kSim0);
  CHECK(put.to_vector<std::uint8_t>() == bytes);
  const MemoryStats after_put = memory_stats(runtime, kSim0);
  CHECK(after_put.pinned_backend_allocations == 1);
  CHECK(after_put.backend_allocations == after_batch.backend_allocations);
}

namespace {

// Values at and next to the limits of T (and around zero), repeated over
// `count` elements in a shifting order.
template <class T>
std::vector<T> limit_values(std::size_t count) {
  using Limits = std::numeric_limits<T>;
  const std::vector<T> edges = {
      Limits::min(),      static_cast<T>(Limits::min() + 1), static_cast<T>(0), static_cast<T>(1),
      static_cast<T>(-1), static_cast<T>(Limits::max() - 1), Limits::max(),     static_cast<T>(Limits::max() / 2 + 1)};
  std::vector<T> values(count);
  for (std::size_t index = 0; index < count; ++index) values[index] = edges[(index * 5 + index / 8) % edges.size()];
  return values;
}

template <class T>
constexpr DType dtype_of() {
  if constexpr (std::is_same_v<T, std::uint8_t>) return DType::kU8;
  if constexpr (std::is_same_v<T, std::int8_t>) return DType::kI8;
  if constexpr (std::is_same_v<T, std::uint16_t>) return DType::kU16;
  if constexpr (std::is_same_v<T, std::int16_t>) return DType::kI16;
  if constexpr (std::is_same_v<T, std::uint32_t>) return DType::kU32;
  if constexpr (std::is_same_v<T, std::int32_t>) return DType::kI32;
  if constexpr (std::is_same_v<T, std::uint64_t>) return DType::kU64;
  return DType::kI64;
}

template <class... Types>
struct TypeList {};
using Integers = TypeList<std::uint8_t, std::int8_t, std::uint16_t, std::int16_t, std::uint32_t, std::int32_t,
                          std::uint64_t, std::int64_t>;

template <class... Types, class Visit>
void for_each_type(TypeList<Types...>, Visit&& visit) {
  (visit(Types{}), ...);
}

}  // namespace

TEST_CASE(
    "[placement] take_windows converts every integer pair that keeps values exactly, limits included, from "
    "unaligned tokens, and refuses the others") {
  Runtime runtime(placement_options());
  // 300 elements: one full block of the vectorised loop plus a tail; windows
  // shorter than a block too.
  constexpr std::size_t kCount = 300;
  for_each_type(Integers{}, [&](auto source_zero) {
    using Source = decltype(source_zero);
    const std::vector<Source> values = limit_values<Source>(kCount);
    // One byte past an aligned start: memory-mapped tensors need not be aligned.
    auto storage = std::make_shared<std::vector<std::byte>>(kCount * sizeof(Source) + 1);
    std::memcpy(storage->data() + 1, values.data(), kCount * sizeof(Source));
    Array tokens = Array::wrap_host(runtime, kCpu0, dtype_of<Source>(), {static_cast<std::int64_t>(kCount)},
                                    storage->data() + 1, storage);
    for_each_type(Integers{}, [&](auto destination_zero) {
      using Destination = decltype(destination_zero);
      CAPTURE(dtype_name(dtype_of<Source>()));
      CAPTURE(dtype_name(dtype_of<Destination>()));
      using SourceLimits = std::numeric_limits<Source>;
      using DestinationLimits = std::numeric_limits<Destination>;
      if (std::cmp_less(SourceLimits::min(), DestinationLimits::min()) ||
          std::cmp_greater(SourceLimits::max(), DestinationLimits::max())) {
        const std::vector<std::int64_t> offsets = {0};
        const Error error =
            error_from([&] { take_windows(runtime, tokens, offsets, 4, kCpu1, dtype_of<Destination>()); });
        CHECK(error.code() == ErrorCode::kInvalidArgument);
        CHECK(contains(error.what(), fmt::format("take_windows: dtype {} cannot hold every {} token",
                                                 dtype_name(dtype_of<Destination>()), dtype_name(dtype_of<Source>()))));
        return;
      }
      for (const std::int64_t length : {std::int64_t{1}, std::int64_t{37}, std::int64_t{299}}) {
        CAPTURE(length);
        const std::vector<std::int64_t> offsets = {0, 1, static_cast<std::int64_t>(kCount) - length};
        std::vector<Destination> expected;
        for (std::int64_t offset : offsets) {
          for (std::int64_t index = 0; index < length; ++index) {
            expected.push_back(static_cast<Destination>(values[static_cast<std::size_t>(offset + index)]));
          }
        }
        for (const Device& device : {kCpu1, kSim0}) {
          CAPTURE(device.selector());
          Array batch = take_windows(runtime, tokens, offsets, length, device, dtype_of<Destination>());
          CHECK(batch.to_vector<Destination>() == expected);
        }
      }
    });
  });
}

TEST_CASE("[placement] take_windows widening keeps the largest unsigned values") {
  Runtime runtime(placement_options());
  const std::vector<std::uint16_t> tokens = {65535, 65534, 0, 32768};
  Array source = tokens_array(runtime, tokens);
  const std::vector<std::int64_t> offsets = {0};
  CHECK(take_windows(runtime, source, offsets, 4, kCpu0, DType::kI64).to_vector<std::int64_t>() ==
        std::vector<std::int64_t>{65535, 65534, 0, 32768});
  CHECK(take_windows(runtime, source, offsets, 4, kCpu0, DType::kI32).to_vector<std::int32_t>() ==
        std::vector<std::int32_t>{65535, 65534, 0, 32768});
  const std::vector<std::uint32_t> wide = {4294967295u, 2147483648u};
  Array wide_source = Array::from_host(runtime, kCpu0, DType::kU32, {2}, wide.data(), 8);
  CHECK(take_windows(runtime, wide_source, offsets, 2, kSim0, DType::kI64).to_vector<std::int64_t>() ==
        std::vector<std::int64_t>{4294967295, 2147483648});
}
