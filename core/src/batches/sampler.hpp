// Where the windows of a step come from: a pure function of the seed, the
// step, the sample's index in the global batch, the sources' sizes and the
// segments (the runs of steps with one batch size, context and mixture).
// docs/batch-stream.md ("How windows are drawn") specifies it to the bit;
// keep the two in step.
#pragma once

#include "batches/deal.hpp"

#include <backplane/batch_stream.hpp>

#include <array>
#include <cstdint>
#include <optional>
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

// A run of steps with one global batch, one context and one mixture.
struct Segment {
  std::int64_t first_step = 0;     // b_m
  std::uint64_t global_batch = 0;  // G
  std::int64_t context = 0;        // T
  std::vector<double> weights;     // empty: unweighted
  // Where a window may start in each source, with this T: N_j.
  std::vector<std::uint64_t> starts;
};

class WindowSampler {
 public:
  // `segments`: in increasing first_step, the first at 0. The caller checked
  // what the draw needs: G >= 1 in every segment; without weights G <= the
  // sum of starts; with weights one weight per source and G <= starts[j]
  // for every source of positive weight; kPerSample only with one segment.
  WindowSampler(std::uint64_t seed, std::vector<Segment> segments, BatchStreamState::Mixture mixture);

  // Windows of global samples [first, first + out.size()) of global `step`,
  // in its segment's batch.
  void draw(std::uint64_t step, std::uint64_t first, std::span<Window> out) const;

  // The epoch global `step` draws in: 0 in the first pass over the window
  // starts, 1 in the second, ... An epoch is one permutation of the starts;
  // it ends when every start is taken, or at a context change, which starts
  // another. With weights each source of positive weight goes through
  // epochs of its own, and this is the least of them (where the step's
  // first sample finds them), so that it counts the passes over all of
  // the data.
  std::uint64_t epoch(std::uint64_t step) const;

 private:
  // An epoch and how many of its places are taken.
  struct Cursor {
    std::uint64_t epoch = 0;
    std::uint64_t taken = 0;
  };
  // A segment with what its draws start from.
  struct Stretch {
    Segment segment;
    Count first_ordinal = 0;                 // O_m
    std::vector<std::uint64_t> first_start;  // C_j: prefix sums of the starts
    std::uint64_t total_starts = 0;          // N
    Cursor cursor;                           // unweighted: at the first step
    std::vector<Cursor> cursors;             // interleaved: each source's, at the first sample
    std::optional<Deal> deal;                // interleaved
    std::vector<double> cumulative;          // per sample: c_j
  };

  void prepare(std::vector<Segment> segments);
  // The cursors after `steps` steps of `stretch`, from where it started.
  static void carry(const Stretch& stretch, std::uint64_t steps, Cursor& cursor, std::vector<Cursor>& cursors);
  const Stretch& stretch_at(std::uint64_t step) const noexcept;
  // The unweighted cursor of step `offset` of `stretch`, where its first
  // sample draws.
  static Cursor cursor_at(const Stretch& stretch, std::uint64_t offset) noexcept;
  void draw_unweighted(const Stretch& stretch, std::uint64_t offset, std::uint64_t first, std::span<Window> out) const;
  void draw_interleaved(const Stretch& stretch, std::uint64_t offset, std::uint64_t first, std::span<Window> out) const;
  void draw_per_sample(const Stretch& stretch, std::uint64_t step, std::uint64_t first, std::span<Window> out) const;
  std::uint64_t random(std::uint64_t a, std::uint64_t b, std::uint64_t purpose, std::uint64_t stream) const noexcept;
  KeyedPermutation permutation(std::uint64_t size, std::uint64_t epoch, std::uint64_t stream) const;

  std::uint64_t seed_;
  BatchStreamState::Mixture mixture_;
  std::vector<Stretch> stretches_;
};

}  // namespace backplane::detail
