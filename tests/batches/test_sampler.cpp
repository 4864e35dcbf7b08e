// The sampler: Philox against NumPy's, the keyed permutation, distinct
// windows per step, whole epochs, weighted shares (dealt, and the per-sample
// rule of version 1 and 2 states), the deal's counts against a walk, and
// segments: an epoch that runs on across a batch-size change.
#include "batches/philox.hpp"
#include "batches/sampler.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
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

using Mixture = BatchStreamState::Mixture;

// A sampler of one segment: G windows a step over sources of `starts`.
WindowSampler one_segment(std::uint64_t seed, std::vector<std::uint64_t> starts, std::vector<double> weights,
                          std::uint64_t global_batch, Mixture mixture = Mixture::kInterleaved) {
  Segment segment;
  segment.global_batch = global_batch;
  segment.context = 1;
  segment.weights = std::move(weights);
  segment.starts = std::move(starts);
  return WindowSampler(seed, {segment}, mixture);
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
  const WindowSampler sampler = one_segment(42, {7, 0, 13}, {}, 6);
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
  const WindowSampler sampler = one_segment(7, {1000}, {}, 16);
  const std::vector<Window> whole = draw(sampler, 12345, 0, 16);
  const std::vector<Window> part = draw(sampler, 12345, 8, 4);
  for (std::size_t index = 0; index < part.size(); ++index) {
    CHECK(part[index].start == whole[8 + index].start);
  }
}

TEST_CASE("[batches] different seeds and steps give different windows; the same give the same") {
  const WindowSampler one = one_segment(1, {100000}, {}, 32);
  const WindowSampler again = one_segment(1, {100000}, {}, 32);
  const WindowSampler other = one_segment(2, {100000}, {}, 32);
  const auto starts = [](const std::vector<Window>& windows) {
    std::vector<std::int64_t> out;
    for (const Window& window : windows) out.push_back(window.start);
    return out;
  };
  CHECK(starts(draw(one, 5, 0, 32)) == starts(draw(again, 5, 0, 32)));
  CHECK(starts(draw(one, 5, 0, 32)) != starts(draw(other, 5, 0, 32)));
  CHECK(starts(draw(one, 5, 0, 32)) != starts(draw(one, 6, 0, 32)));
}

TEST_CASE("[batches] per sample (states version 1, 2): shares converge to the weights, a step's windows are distinct") {
  const std::vector<double> weights = {0.7, 0.0, 0.2, 0.1};
  const WindowSampler sampler = one_segment(9, {5000, 5000, 300, 5000}, weights, 100, Mixture::kPerSample);
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
  const WindowSampler sampler = one_segment(3, {50, 50, 50}, {0.1, 0.2, 0.0}, 10);
  for (std::uint64_t step = 0; step < 2000; ++step) {
    for (const Window& window : draw(sampler, step, 0, 10)) CHECK(window.source != 2);
  }
}

TEST_CASE("[batches] floor_sum is the sum it names, for the golden-ratio step and small ones") {
  const auto naive = [](std::uint64_t n, std::uint64_t m, std::uint64_t a, std::uint64_t b) {
    Count sum = 0;
    for (std::uint64_t i = 0; i < n; ++i) sum += (Count{a} * i + b) / m;
    return sum;
  };
  for (std::uint64_t n : {0ULL, 1ULL, 2ULL, 7ULL, 100ULL, 1000ULL}) {
    for (std::uint64_t m : {1ULL, 3ULL, 17ULL, 1000ULL}) {
      for (std::uint64_t a : {0ULL, 1ULL, 5ULL, 999ULL, 12345ULL}) {
        for (std::uint64_t b : {0ULL, 2ULL, 1001ULL}) {
          CAPTURE(n);
          CAPTURE(m);
          CAPTURE(a);
          CAPTURE(b);
          CHECK(floor_sum(n, m, a, b) == naive(n, m, a, b));
        }
      }
    }
  }
  // With m = 2^64 the terms are the carries of n * kGolden + b past 2^64.
  const Count period = Count{1} << 64;
  Count carries = 0;
  const std::uint64_t b = 0xFEDCBA9876543210;
  for (std::uint64_t i = 0; i < 5000; ++i) carries += (Count{kGolden} * i + b) >> 64;
  CHECK(floor_sum(5000, period, kGolden, b) == carries);
}

TEST_CASE("[batches] the deal's counts equal a walk over the samples, past 2^64 too") {
  const std::vector<double> weights = {0.5, 0.0, 0.3, 0.2};
  const Deal deal(weights, 0x0123456789ABCDEF);
  for (const Count first : {Count{0}, Count{777}, (Count{1} << 64) - 300, (Count{5} << 64) + 12}) {
    std::vector<Count> walked(weights.size(), 0);
    for (Count ordinal = first; ordinal < first + 1000; ++ordinal) walked[deal.source_of(ordinal)] += 1;
    std::vector<Count> counted(weights.size());
    deal.counts(first, 1000, counted);
    CHECK(counted == walked);
    CHECK(walked[1] == 0);
  }
  // A whole period of 2^64 samples, and one more: each source's exact share
  // of 2^64 (its K_j - K_{j-1}), then the one sample's source.
  std::vector<Count> period(weights.size());
  deal.counts(3, (Count{1} << 64) + 1, period);
  Count total = 0;
  for (const Count count : period) total += count;
  CHECK(total == (Count{1} << 64) + 1);
}

TEST_CASE("[batches] dealt: each source's share within a handful of its weight, and its draws whole epochs") {
  // Source 2 has 300 starts and a fifth of 100 windows a step: its epoch
  // turns every 15 steps, inside a step.
  const std::vector<double> weights = {0.7, 0.0, 0.2, 0.1};
  const std::vector<std::uint64_t> starts = {5000, 5000, 300, 5000};
  const WindowSampler sampler = one_segment(9, starts, weights, 100);
  std::vector<std::vector<std::int64_t>> drawn(weights.size());
  for (std::uint64_t step = 0; step < 100; ++step) {
    for (const Window& window : draw(sampler, step, 0, 100)) {
      drawn[static_cast<std::size_t>(window.source)].push_back(window.start);
    }
    for (std::size_t source = 0; source < weights.size(); ++source) {
      CAPTURE(source);
      const double expected = weights[source] * 100.0 * static_cast<double>(step + 1);
      CHECK(std::abs(static_cast<double>(drawn[source].size()) - expected) <= 5.0);
    }
  }
  CHECK(drawn[1].empty());
  // Each run of N_j draws of a source visits each of its starts once.
  for (std::size_t source : {0UL, 2UL, 3UL}) {
    const std::vector<std::int64_t>& list = drawn[source];
    for (std::size_t first = 0; first + starts[source] <= list.size(); first += starts[source]) {
      const std::set<std::int64_t> epoch(list.begin() + static_cast<std::ptrdiff_t>(first),
                                         list.begin() + static_cast<std::ptrdiff_t>(first + starts[source]));
      CHECK(epoch.size() == starts[source]);
    }
  }
}

TEST_CASE("[batches] segments: an epoch runs on across a batch-size change, and a context change ends it") {
  // 100 starts; 8 windows a step for 5 steps (40 places), then 20 a step:
  // the epoch goes on at place 40 and holds 3 more steps (100 - 40 = 60).
  Segment small;
  small.global_batch = 8;
  small.context = 4;
  small.starts = {100};
  Segment large = small;
  large.first_step = 5;
  large.global_batch = 20;
  const WindowSampler sampler(5, {small, large}, Mixture::kInterleaved);
  std::set<std::int64_t> epoch;
  for (std::uint64_t step = 0; step < 8; ++step) {
    const std::size_t count = step < 5 ? 8 : 20;
    for (const Window& window : draw(sampler, step, 0, count)) CHECK(epoch.insert(window.start).second);
  }
  CHECK(epoch.size() == 100);  // 5 x 8 + 3 x 20: every start once
  // Step 8 starts the next epoch: another order of the same starts.
  std::set<std::int64_t> next;
  for (const Window& window : draw(sampler, 8, 0, 20)) next.insert(window.start);
  CHECK(next.size() == 20);

  // The same plan with the context changing at step 5 (and N with it):
  // step 5 starts epoch 1, which at a batch of 20 is what step 0 of a
  // stream made with that segment alone would draw in its epoch 1 (step 5).
  Segment longer = large;
  longer.context = 9;
  longer.starts = {95};
  const WindowSampler changed(5, {small, longer}, Mixture::kInterleaved);
  Segment alone = longer;
  alone.first_step = 0;
  const WindowSampler reference(5, {alone}, Mixture::kInterleaved);
  // In `reference`, epoch 1 begins at step 95 / 20 = 4.
  const auto starts = [](const std::vector<Window>& windows) {
    std::vector<std::int64_t> out;
    for (const Window& window : windows) out.push_back(window.start);
    return out;
  };
  CHECK(starts(draw(changed, 5, 0, 20)) == starts(draw(reference, 4, 0, 20)));
  CHECK(starts(draw(changed, 6, 0, 20)) == starts(draw(reference, 5, 0, 20)));
}

TEST_CASE("[batches] epoch: the pass a step draws in, ended by a full pass or a context change") {
  // 20 starts, 6 windows a step: 3 steps an epoch.
  const WindowSampler sampler = one_segment(42, {7, 0, 13}, {}, 6);
  for (std::uint64_t step = 0; step < 12; ++step) CHECK(sampler.epoch(step) == step / 3);

  // 100 starts, 8 a step for 5 steps, then 20 a step: epoch 0 holds steps
  // 0-7 (40 + 60 places); with the context changing at step 5, step 5 starts
  // epoch 1 and its 95 starts hold 4 steps of 20.
  Segment small;
  small.global_batch = 8;
  small.context = 4;
  small.starts = {100};
  Segment large = small;
  large.first_step = 5;
  large.global_batch = 20;
  const WindowSampler resized(5, {small, large}, Mixture::kInterleaved);
  for (std::uint64_t step = 0; step < 8; ++step) CHECK(resized.epoch(step) == 0);
  CHECK(resized.epoch(8) == 1);
  Segment longer = large;
  longer.context = 9;
  longer.starts = {95};
  const WindowSampler changed(5, {small, longer}, Mixture::kInterleaved);
  CHECK(changed.epoch(4) == 0);
  for (std::uint64_t step = 5; step < 9; ++step) CHECK(changed.epoch(step) == 1);
  CHECK(changed.epoch(9) == 2);
}

TEST_CASE("[batches] epoch with weights: the least of the sources' passes, as their draws count them") {
  // 5 windows a step from each source: source 0 (40 starts) passes every
  // 8 steps, source 1 (60 starts) every 12; a source of weight 0 never counts.
  const std::vector<std::uint64_t> starts = {40, 60, 0};
  for (const Mixture mixture : {Mixture::kInterleaved, Mixture::kPerSample}) {
    CAPTURE(static_cast<int>(mixture));
    const WindowSampler sampler = one_segment(3, starts, {0.5, 0.5, 0.0}, 10, mixture);
    std::vector<std::uint64_t> drawn(starts.size(), 0);  // before the step
    for (std::uint64_t step = 0; step < 40; ++step) {
      CAPTURE(step);
      if (mixture == Mixture::kInterleaved) {
        // Each source's draws so far, over its starts: its own passes.
        CHECK(sampler.epoch(step) == std::min(drawn[0] / starts[0], drawn[1] / starts[1]));
      } else {
        // Per sample, a source's epoch is step / (N_j / G) whatever it drew.
        CHECK(sampler.epoch(step) == std::min(step / 4, step / 6));
      }
      for (const Window& window : draw(sampler, step, 0, 10)) ++drawn[static_cast<std::size_t>(window.source)];
    }
  }
}
