// Where the windows of a step come from: a pure function of the seed, the
// step, the sample's index in the global batch and the sources' sizes.
// docs/batch-stream.md specifies it to the bit; keep the two in step.
#pragma once

#include <backplane/batch_stream.hpp>

#include <array>
#include <cstdint>
#include <span>
#include <vector>

namespace backplane::detail {

// A keyed pseudo-random permutation of [0, size): a balanced Feistel network
// of kRounds rounds over the smallest even number of bits that holds `size`,
// with cycle walking (values >= size are permuted again until one is inside).
class KeyedPermutation {
 public:
  static constexpr int kRounds = 6;
  KeyedPermutation(std::uint64_t size, const std::array<std::uint64_t, kRounds>& round_keys);
  std::uint64_t operator()(std::uint64_t index) const noexcept;

 private:
  std::uint64_t once(std::uint64_t value) const noexcept;

  std::uint64_t size_;
  unsigned half_bits_;
  std::uint64_t half_mask_;
  std::array<std::uint64_t, kRounds> round_keys_;
};

class WindowSampler {
 public:
  // `starts[j]`: how many windows source j holds (its length - T). The caller
  // checked what the constructor's contract needs: global_batch >= 1; without
  // weights, global_batch <= the sum of starts; with weights, one weight per
  // source and global_batch <= starts[j] for every source of positive weight.
  WindowSampler(std::uint64_t seed, std::vector<std::uint64_t> starts, std::vector<double> weights,
                std::uint64_t global_batch);

  // Windows of global samples [first, first + out.size()) of global `step`.
  void draw(std::uint64_t step, std::uint64_t first, std::span<Window> out) const;

 private:
  std::uint64_t random(std::uint64_t a, std::uint64_t b, std::uint64_t purpose, std::uint64_t stream) const noexcept;
  KeyedPermutation permutation(std::uint64_t size, std::uint64_t epoch, std::uint64_t stream) const;

  std::uint64_t seed_;
  std::vector<std::uint64_t> starts_;
  std::vector<std::uint64_t> first_start_;  // prefix sums of starts_
  std::uint64_t total_starts_ = 0;
  std::vector<double> cumulative_;  // normalised prefix sums of the weights; empty: unweighted
  std::uint64_t global_batch_;
};

}  // namespace backplane::detail
