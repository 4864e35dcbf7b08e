// The interleaved mixture of a weighted batch stream (docs/batch-stream.md,
// "Weighted"): the sample of ordinal n goes to the first source j with
// v_n < K_j, where v_n = (n * kGolden + offset) mod 2^64 and K_j are the
// weights' cumulative shares scaled to 2^64. The golden-ratio sequence
// spreads every run of samples evenly, so each source gets its share to
// within a few samples, and how many of a run go to a source has a closed
// form (a floor sum): a source's place in its own order is computed for any
// step without a walk.
#pragma once

#include "batches/philox.hpp"

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace backplane::detail {

// Ordinals and draw counts: exact, past 2^64 on long runs.
using Count = Wide;

// 2^64 over the golden ratio, rounded down (odd, so n * kGolden mod 2^64
// visits every value once per 2^64 samples).
inline constexpr std::uint64_t kGolden = 0x9E3779B97F4A7C15;

// c_j of docs/batch-stream.md ("Weighted"): the weights summed left to right
// in doubles and divided by their sum, exactly 1 from the last source of
// positive weight on (so rounding leaves no gap below 1 that a source of
// weight 0 could fill). Both weighted rules, dealt and per sample, start here.
std::vector<double> cumulative_shares(std::span<const double> weights);

class Deal {
 public:
  // `weights`: one per source, >= 0, not all zero (checked by the caller).
  // `offset`: k, the seed's shift of the sequence.
  Deal(std::span<const double> weights, std::uint64_t offset);

  // The source of the sample of ordinal `ordinal`.
  std::size_t source_of(Count ordinal) const noexcept;
  // How many of the samples of ordinals [first, first + count) go to each
  // source, into `out` (one per source).
  void counts(Count first, Count count, std::span<Count> out) const noexcept;

 private:
  std::vector<Count> bounds_;  // K_j, nondecreasing, the last 2^64
  std::uint64_t offset_;
};

// sum over i in [0, n) of floor((a * i + b) / m), modulo 2^128 (the caller
// subtracts two of them whose true difference is below 2^128). n < 2^64,
// a and m <= 2^64, b < 2^65.
Count floor_sum(Count n, Count m, Count a, Count b) noexcept;

}  // namespace backplane::detail
