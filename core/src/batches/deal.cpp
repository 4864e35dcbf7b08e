// The interleaved mixture's deal and its counts (deal.hpp).
#include "batches/deal.hpp"

#include <algorithm>
#include <cmath>

namespace backplane::detail {
namespace {

constexpr Count kPeriod = Count{1} << 64;

}  // namespace

Count floor_sum(Count n, Count m, Count a, Count b) noexcept {
  // The Euclid-like reduction: take the whole parts of a / m and b / m out
  // of the sum, then count the lattice points under the line the other way
  // round (x and y swapped), with m and a exchanged. Each round shrinks
  // (m, a) as Euclid's algorithm does, so it ends in O(log m) rounds.
  Count sum = 0;
  while (true) {
    if (a >= m) {
      const Count pairs = n % 2 == 0 ? (n / 2) * (n - 1) : n * ((n - 1) / 2);  // n (n - 1) / 2, exact
      sum += pairs * (a / m);
      a %= m;
    }
    if (b >= m) {
      sum += n * (b / m);
      b %= m;
    }
    const Count top = a * n + b;  // below 2^128: a, b < m <= 2^64 and n < 2^64
    if (top < m) return sum;
    n = top / m;
    b = top % m;
    std::swap(m, a);
  }
}

std::vector<double> cumulative_shares(std::span<const double> weights) {
  double sum = 0;
  for (const double weight : weights) sum += weight;
  std::size_t last = 0;
  for (std::size_t source = 0; source < weights.size(); ++source) {
    if (weights[source] > 0) last = source;
  }
  std::vector<double> shares;
  double running = 0;
  for (std::size_t source = 0; source < weights.size(); ++source) {
    running += weights[source];
    shares.push_back(source >= last ? 1.0 : running / sum);
  }
  return shares;
}

Deal::Deal(std::span<const double> weights, std::uint64_t offset) : offset_(offset) {
  for (const double share : cumulative_shares(weights)) {
    // K_j = floor(c_j * 2^64): a share below 1 scales to below 2^64
    // exactly, and the cast rounds down.
    bounds_.push_back(share >= 1.0 ? kPeriod : Count{static_cast<std::uint64_t>(std::ldexp(share, 64))});
  }
}

std::size_t Deal::source_of(Count ordinal) const noexcept {
  const std::uint64_t value = static_cast<std::uint64_t>(ordinal) * kGolden + offset_;
  return static_cast<std::size_t>(std::upper_bound(bounds_.begin(), bounds_.end(), Count{value}) - bounds_.begin());
}

void Deal::counts(Count first, Count count, std::span<Count> out) const noexcept {
  // Every full period of 2^64 samples takes each value of v once; the rest
  // starts where `first` does, at v = beta.
  const Count periods = count >> 64;
  const Count rest = count & (kPeriod - 1);
  const Count shift = static_cast<std::uint64_t>(first) * kGolden + offset_;  // beta, mod 2^64
  const Count base = floor_sum(rest, kPeriod, kGolden, shift);
  const auto below = [&](Count bound) -> Count {
    if (bound == 0) return 0;
    if (bound == kPeriod) return periods * bound + rest;
    // v_n >= bound exactly where adding 2^64 - bound carries past the next
    // multiple of 2^64: the rest less those carries have v_n < bound.
    const Count carries = floor_sum(rest, kPeriod, kGolden, shift + kPeriod - bound) - base;
    return periods * bound + rest - carries;
  };
  Count before = 0;
  for (std::size_t source = 0; source < bounds_.size(); ++source) {
    const Count upto = source > 0 && bounds_[source] == bounds_[source - 1] ? before : below(bounds_[source]);
    out[source] = upto - before;
    before = upto;
  }
}

}  // namespace backplane::detail
