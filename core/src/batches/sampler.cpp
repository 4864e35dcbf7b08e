// The sampling algorithm of docs/batch-stream.md ("How windows are drawn").
#include "batches/sampler.hpp"

#include "batches/philox.hpp"

#include <algorithm>
#include <bit>
#include <optional>

namespace backplane::detail {
namespace {

// What a Philox draw is for: its third counter word.
constexpr std::uint64_t kPurposeRoundKey = 1;
constexpr std::uint64_t kPurposeSource = 2;

// SplitMix64's output function (Steele, Lea and Flood, OOPSLA 2014): a
// bijective 64-bit mixer, the Feistel round function.
constexpr std::uint64_t mix64(std::uint64_t z) noexcept {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EB;
  return z ^ (z >> 31);
}

}  // namespace

KeyedPermutation::KeyedPermutation(std::uint64_t size, const std::array<std::uint64_t, kRounds>& round_keys)
    : size_(size), round_keys_(round_keys) {
  // Bits to hold size - 1, rounded up to an even count of at least 2, so the
  // domain 2^(2h) is below 4 * size and cycle walking takes < 4 tries on average.
  const unsigned bits = size <= 1 ? 1 : static_cast<unsigned>(std::bit_width(size - 1));
  half_bits_ = std::max(1U, (bits + 1) / 2);
  half_mask_ = half_bits_ == 32 ? 0xFFFFFFFF : (std::uint64_t{1} << half_bits_) - 1;
}

std::uint64_t KeyedPermutation::once(std::uint64_t value) const noexcept {
  std::uint64_t left = value >> half_bits_;
  std::uint64_t right = value & half_mask_;
  for (const std::uint64_t key : round_keys_) {
    const std::uint64_t next = left ^ (mix64(right ^ key) & half_mask_);
    left = right;
    right = next;
  }
  return (left << half_bits_) | right;
}

std::uint64_t KeyedPermutation::operator()(std::uint64_t index) const noexcept {
  std::uint64_t value = once(index);
  while (value >= size_) value = once(value);
  return value;
}

WindowSampler::WindowSampler(std::uint64_t seed, std::vector<std::uint64_t> starts, std::vector<double> weights,
                             std::uint64_t global_batch)
    : seed_(seed), starts_(std::move(starts)), global_batch_(global_batch) {
  for (const std::uint64_t count : starts_) {
    first_start_.push_back(total_starts_);
    total_starts_ += count;
  }
  if (weights.empty()) return;
  double sum = 0;
  for (const double weight : weights) sum += weight;
  double running = 0;
  for (const double weight : weights) {
    running += weight;
    cumulative_.push_back(running / sum);
  }
  // Rounding must not leave a gap below 1 that a source of weight 0 fills:
  // from the last source of positive weight on, the bound is exactly 1.
  const auto last = static_cast<std::size_t>(
      weights.rend() - std::find_if(weights.rbegin(), weights.rend(), [](double weight) { return weight > 0; }));
  for (std::size_t source = last == 0 ? 0 : last - 1; source < cumulative_.size(); ++source) cumulative_[source] = 1.0;
}

std::uint64_t WindowSampler::random(std::uint64_t a, std::uint64_t b, std::uint64_t purpose,
                                    std::uint64_t stream) const noexcept {
  return philox4x64_10({a, b, purpose, stream}, {seed_, 0})[0];
}

KeyedPermutation WindowSampler::permutation(std::uint64_t size, std::uint64_t epoch, std::uint64_t stream) const {
  std::array<std::uint64_t, KeyedPermutation::kRounds> keys{};
  for (std::size_t round = 0; round < keys.size(); ++round)
    keys[round] = random(epoch, round, kPurposeRoundKey, stream);
  return KeyedPermutation(size, keys);
}

void WindowSampler::draw(std::uint64_t step, std::uint64_t first, std::span<Window> out) const {
  if (cumulative_.empty()) {
    // One permutation of every start of every source per epoch; an epoch is
    // a whole number of steps, so a step's windows are distinct.
    const std::uint64_t steps_per_epoch = total_starts_ / global_batch_;
    const KeyedPermutation order = permutation(total_starts_, step / steps_per_epoch, 0);
    const std::uint64_t base = (step % steps_per_epoch) * global_batch_ + first;
    for (std::size_t index = 0; index < out.size(); ++index) {
      const std::uint64_t position = order(base + index);
      const auto source = static_cast<std::size_t>(
          std::upper_bound(first_start_.begin(), first_start_.end(), position) - first_start_.begin() - 1);
      out[index] = {static_cast<std::int32_t>(source), static_cast<std::int64_t>(position - first_start_[source])};
    }
    return;
  }
  // Weighted: each sample picks its source, then its start from that
  // source's own permutation at the sample's place in the global batch.
  std::vector<std::optional<KeyedPermutation>> orders(starts_.size());
  for (std::size_t index = 0; index < out.size(); ++index) {
    const std::uint64_t sample = first + index;
    const double uniform = static_cast<double>(random(step, sample, kPurposeSource, 0) >> 11) * 0x1.0p-53;
    std::size_t source = 0;
    while (source + 1 < cumulative_.size() && !(uniform < cumulative_[source])) ++source;
    const std::uint64_t steps_per_epoch = starts_[source] / global_batch_;
    std::optional<KeyedPermutation>& order = orders[source];
    if (!order) order = permutation(starts_[source], step / steps_per_epoch, source + 1);
    const std::uint64_t position = (*order)((step % steps_per_epoch) * global_batch_ + sample);
    out[index] = {static_cast<std::int32_t>(source), static_cast<std::int64_t>(position)};
  }
}

}  // namespace backplane::detail
