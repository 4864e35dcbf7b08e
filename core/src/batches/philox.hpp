// Philox4x64-10 (Salmon, Moraes, Dror and Shaw, "Parallel random numbers: as
// easy as 1, 2, 3", SC 2011): a counter-based generator, so the value for any
// counter is computed directly. The same function as NumPy's
// numpy.random.Philox, whose n-th raw output (n = 0, 1, ...) is word n % 4 of
// philox4x64_10(counter = n / 4 + 1, key).
#pragma once

#include <array>
#include <cstdint>

namespace backplane::detail {

using PhiloxCounter = std::array<std::uint64_t, 4>;
using PhiloxKey = std::array<std::uint64_t, 2>;

// 128-bit products: GCC and Clang have the type; __extension__ keeps
// -Wpedantic quiet about it.
__extension__ typedef unsigned __int128 Wide;

constexpr PhiloxCounter philox4x64_10(PhiloxCounter counter, PhiloxKey key) noexcept {
  constexpr std::uint64_t kMultiplier0 = 0xD2E7470EE14C6C93;
  constexpr std::uint64_t kMultiplier1 = 0xCA5A826395121157;
  constexpr std::uint64_t kWeyl0 = 0x9E3779B97F4A7C15;  // golden ratio
  constexpr std::uint64_t kWeyl1 = 0xBB67AE8584CAA73B;  // sqrt(3) - 1
  for (int round = 0; round < 10; ++round) {
    const Wide product0 = static_cast<Wide>(kMultiplier0) * counter[0];
    const Wide product1 = static_cast<Wide>(kMultiplier1) * counter[2];
    const auto high0 = static_cast<std::uint64_t>(product0 >> 64);
    const auto low0 = static_cast<std::uint64_t>(product0);
    const auto high1 = static_cast<std::uint64_t>(product1 >> 64);
    const auto low1 = static_cast<std::uint64_t>(product1);
    counter = {high1 ^ counter[1] ^ key[0], low1, high0 ^ counter[3] ^ key[1], low0};
    key[0] += kWeyl0;
    key[1] += kWeyl1;
  }
  return counter;
}

}  // namespace backplane::detail
