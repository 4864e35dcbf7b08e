// The sampler: Philox against NumPy's, the keyed permutation, distinct
// windows per step, whole epochs, and weighted shares.
#include "batches/philox.hpp"
#include "batches/sampler.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <set>
#include <utility>
#include <vector>

using namespace backplane;
using namespace backplane::detail;

namespace {

std::array<std::uint64_t, KeyedPermutation::kRounds> keys(std::uint64_t seed) {
  std::array<std::uint64_t, KeyedPermutation::kRounds> out{};
  for (std::size_t round = 0; round < out.size(); ++round) out[round] = philox4x64_10({seed, round, 0, 0}, {1, 2})[0];
  return out;
}

std::vector<Window> draw(const WindowSampler& sampler, std::uint64_t step, std::uint64_t first, std::size_t count) {
  std::vector<Window> out(count);
  sampler.draw(step, first, out);
  return out;
}

}  // namespace

TEST_CASE("[batches] philox4x64_10 gives NumPy's numpy.random.Philox words") {
  // numpy.random.Philox(key=k, counter=c).random_raw(4) is philox(c + 1, k).
  CHECK(philox4x64_10({1, 0, 0, 0}, {0, 0}) ==
        PhiloxCounter{0x02f4ba6408e4d89b, 0x3dd62b0b9ca8c5b2, 0x1c8667a55d902e79, 0x907d7a052fd5b4dc});
  CHECK(philox4x64_10({6, 6, 7, 8}, {0x123456789, 7}) ==
        PhiloxCounter{0x262d89466e386bc3, 0x99ebdd38b7215172, 0x770b1f2f00b54413, 0xe7bf68dae858a98a});
}

TEST_CASE("[batches] the keyed permutation is a bijection of [0, size) for every size") {
  for (std::uint64_t size : {1ULL, 2ULL, 3ULL, 4ULL, 5ULL, 17ULL, 64ULL, 65ULL, 1000ULL, 4097ULL, 65537ULL}) {
    CAPTURE(size);
    const KeyedPermutation permutation(size, keys(size));
    std::vector<bool> seen(size, false);
    for (std::uint64_t index = 0; index < size; ++index) {
      const std::uint64_t value = permutation(index);
      REQUIRE(value < size);
      CHECK_FALSE(seen[value]);
      seen[value] = true;
    }
  }
}

TEST_CASE("[batches] the keyed permutation handles sizes near 2^63 without overflow") {
  const std::uint64_t size = (std::uint64_t{1} << 63) + 12345;
  const KeyedPermutation permutation(size, keys(3));
  std::set<std::uint64_t> values;
  for (std::uint64_t index = size - 1000; index < size; ++index) {
    const std::uint64_t value = permutation(index);
    CHECK(value < size);
    values.insert(value);
  }
  CHECK(values.size() == 1000);
}

TEST_CASE("[batches] unweighted: a step's windows are distinct and an epoch visits every start once") {
  // Three sources of 7, 0 and 13 starts: 20 starts, 6 windows a step,
  // 3 steps an epoch (2 starts left out of each epoch, a different 2 each).
  const WindowSampler sampler(42, {7, 0, 13}, {}, 6);
  for (std::uint64_t epoch = 0; epoch < 4; ++epoch) {
    std::set<std::pair<int, std::int64_t>> visited;
    for (std::uint64_t step = epoch * 3; step < epoch * 3 + 3; ++step) {
      for (const Window& window : draw(sampler, step, 0, 6)) {
        CHECK(window.source != 1);
        CHECK(window.start >= 0);
        CHECK(window.start < (window.source == 0 ? 7 : 13));
        CHECK(visited.insert({window.source, window.start}).second);
      }
    }
    CHECK(visited.size() == 18);
  }
}

TEST_CASE("[batches] a rank's slice of a step is the same windows as that slice of the whole step") {
  const WindowSampler sampler(7, {1000}, {}, 16);
  const std::vector<Window> whole = draw(sampler, 12345, 0, 16);
  const std::vector<Window> part = draw(sampler, 12345, 8, 4);
  for (std::size_t index = 0; index < part.size(); ++index) {
    CHECK(part[index].start == whole[8 + index].start);
  }
}

TEST_CASE("[batches] different seeds and steps give different windows; the same give the same") {
  const WindowSampler one(1, {100000}, {}, 32);
  const WindowSampler again(1, {100000}, {}, 32);
  const WindowSampler other(2, {100000}, {}, 32);
  const auto starts = [](const std::vector<Window>& windows) {
    std::vector<std::int64_t> out;
    for (const Window& window : windows) out.push_back(window.start);
    return out;
  };
  CHECK(starts(draw(one, 5, 0, 32)) == starts(draw(again, 5, 0, 32)));
  CHECK(starts(draw(one, 5, 0, 32)) != starts(draw(other, 5, 0, 32)));
  CHECK(starts(draw(one, 5, 0, 32)) != starts(draw(one, 6, 0, 32)));
}

TEST_CASE("[batches] weighted: shares converge to the weights, and a step's windows stay distinct") {
  const std::vector<double> weights = {0.7, 0.0, 0.2, 0.1};
  const WindowSampler sampler(9, {5000, 5000, 300, 5000}, weights, 100);
  std::vector<double> counts(weights.size(), 0);
  const int steps = 100;  // 10,000 windows
  for (int step = 0; step < steps; ++step) {
    std::set<std::pair<int, std::int64_t>> seen;
    for (const Window& window : draw(sampler, static_cast<std::uint64_t>(step), 0, 100)) {
      counts[static_cast<std::size_t>(window.source)] += 1;
      CHECK(seen.insert({window.source, window.start}).second);
    }
  }
  for (std::size_t source = 0; source < weights.size(); ++source) {
    CAPTURE(source);
    // Binomial: n = 10,000 draws; 5 standard deviations is a false alarm
    // about once in 3.5 million runs.
    const double n = steps * 100.0;
    const double sigma = std::sqrt(n * weights[source] * (1 - weights[source]));
    CHECK(std::abs(counts[source] - n * weights[source]) <= 5 * sigma);
  }
  CHECK(counts[1] == 0);
}

TEST_CASE("[batches] weighted: a last source of weight zero is never drawn, whatever the rounding") {
  const WindowSampler sampler(3, {50, 50, 50}, {0.1, 0.2, 0.0}, 10);
  for (std::uint64_t step = 0; step < 2000; ++step) {
    for (const Window& window : draw(sampler, step, 0, 10)) CHECK(window.source != 2);
  }
}
