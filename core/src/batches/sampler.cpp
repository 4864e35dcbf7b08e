// The sampling algorithm of docs/batch-stream.md ("How windows are drawn").
#include "batches/sampler.hpp"

#include "batches/philox.hpp"

#include <algorithm>
#include <bit>
#include <optional>
#include <utility>

namespace backplane::detail {
namespace {

// What a Philox draw is for: its third counter word.
constexpr std::uint64_t kPurposeRoundKey = 1;
constexpr std::uint64_t kPurposeSource = 2;
constexpr std::uint64_t kPurposeDeal = 3;

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

WindowSampler::WindowSampler(std::uint64_t seed, std::vector<Segment> segments, BatchStreamState::Mixture mixture)
    : seed_(seed), mixture_(mixture) {
  prepare(std::move(segments));
}

void WindowSampler::prepare(std::vector<Segment> segments) {
  const std::uint64_t offset = random(0, 0, kPurposeDeal, 0);
  Count ordinal = 0;
  Cursor cursor;
  std::vector<Cursor> cursors(segments.front().starts.size());
  for (std::size_t index = 0; index < segments.size(); ++index) {
    Stretch stretch;
    stretch.segment = std::move(segments[index]);
    const Segment& segment = stretch.segment;
    stretch.first_ordinal = ordinal;
    for (const std::uint64_t count : segment.starts) {
      stretch.first_start.push_back(stretch.total_starts);
      stretch.total_starts += count;
    }
    // A context change ends every epoch in progress: the starts are others.
    if (index > 0 && segment.context != stretches_.back().segment.context) {
      if (cursor.taken > 0) cursor = {cursor.epoch + 1, 0};
      for (Cursor& own : cursors) {
        if (own.taken > 0) own = {own.epoch + 1, 0};
      }
    }
    stretch.cursor = cursor;
    stretch.cursors = cursors;
    if (!segment.weights.empty()) {
      if (mixture_ == BatchStreamState::Mixture::kInterleaved) {
        stretch.deal.emplace(segment.weights, offset);
      } else {
        stretch.cumulative = cumulative_shares(segment.weights);
      }
    }
    if (index + 1 < segments.size()) {
      const auto steps = static_cast<std::uint64_t>(segments[index + 1].first_step - segment.first_step);
      carry(stretch, steps, cursor, cursors);
      ordinal += Count{steps} * segment.global_batch;
    }
    stretches_.push_back(std::move(stretch));
  }
}

void WindowSampler::carry(const Stretch& stretch, std::uint64_t steps, Cursor& cursor, std::vector<Cursor>& cursors) {
  const Segment& segment = stretch.segment;
  if (segment.weights.empty()) {
    cursor = cursor_at(stretch, steps - 1);
    cursor.taken += segment.global_batch;
    return;
  }
  if (!stretch.deal) return;  // per sample: one segment, nothing to carry
  std::vector<Count> drawn(cursors.size());
  stretch.deal->counts(stretch.first_ordinal, Count{steps} * segment.global_batch, drawn);
  for (std::size_t source = 0; source < cursors.size(); ++source) {
    if (drawn[source] == 0) continue;  // a source of weight 0 may have no starts
    const Count total = cursors[source].taken + drawn[source];
    const std::uint64_t starts = segment.starts[source];
    cursors[source] = {cursors[source].epoch + static_cast<std::uint64_t>(total / starts),
                       static_cast<std::uint64_t>(total % starts)};
  }
}

const WindowSampler::Stretch& WindowSampler::stretch_at(std::uint64_t step) const noexcept {
  const auto after =
      std::upper_bound(stretches_.begin(), stretches_.end(), step, [](std::uint64_t at, const Stretch& stretch) {
        return at < static_cast<std::uint64_t>(stretch.segment.first_step);
      });
  return *std::prev(after);
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

WindowSampler::Cursor WindowSampler::cursor_at(const Stretch& stretch, std::uint64_t offset) noexcept {
  // The epoch the segment starts in goes on while whole steps fit, then
  // each epoch holds N / G steps.
  const std::uint64_t batch = stretch.segment.global_batch;
  const std::uint64_t total = stretch.total_starts;
  const std::uint64_t fitting = (total - stretch.cursor.taken) / batch;
  if (offset < fitting) return {stretch.cursor.epoch, stretch.cursor.taken + offset * batch};
  const std::uint64_t later = offset - fitting;
  const std::uint64_t steps_per_epoch = total / batch;
  return {stretch.cursor.epoch + 1 + later / steps_per_epoch, (later % steps_per_epoch) * batch};
}

void WindowSampler::draw(std::uint64_t step, std::uint64_t first, std::span<Window> out) const {
  const Stretch& stretch = stretch_at(step);
  const std::uint64_t offset = step - static_cast<std::uint64_t>(stretch.segment.first_step);
  if (stretch.segment.weights.empty()) {
    draw_unweighted(stretch, offset, first, out);
  } else if (stretch.deal) {
    draw_interleaved(stretch, offset, first, out);
  } else {
    draw_per_sample(stretch, step, first, out);
  }
}

std::uint64_t WindowSampler::epoch(std::uint64_t step) const {
  const Stretch& stretch = stretch_at(step);
  const Segment& segment = stretch.segment;
  const std::uint64_t offset = step - static_cast<std::uint64_t>(segment.first_step);
  if (segment.weights.empty()) return cursor_at(stretch, offset).epoch;
  std::vector<Count> drawn(segment.starts.size());
  if (stretch.deal) stretch.deal->counts(stretch.first_ordinal, Count{offset} * segment.global_batch, drawn);
  std::optional<std::uint64_t> least;
  for (std::size_t source = 0; source < segment.starts.size(); ++source) {
    if (!(segment.weights[source] > 0)) continue;  // never drawn: it may have no starts
    const std::uint64_t starts = segment.starts[source];
    std::uint64_t own = 0;
    if (stretch.deal) {
      const Cursor& cursor = stretch.cursors[source];
      own = cursor.epoch + static_cast<std::uint64_t>((cursor.taken + drawn[source]) / starts);
    } else {
      own = step / (starts / segment.global_batch);  // per sample, as draw_per_sample permutes
    }
    least = least ? std::min(*least, own) : own;
  }
  return least.value_or(0);
}

void WindowSampler::draw_unweighted(const Stretch& stretch, std::uint64_t offset, std::uint64_t first,
                                    std::span<Window> out) const {
  // One permutation of every start of every source per epoch; an epoch is
  // a whole number of steps, so a step's windows are distinct.
  const Cursor cursor = cursor_at(stretch, offset);
  const KeyedPermutation order = permutation(stretch.total_starts, cursor.epoch, 0);
  const std::uint64_t base = cursor.taken + first;
  const std::vector<std::uint64_t>& first_start = stretch.first_start;
  for (std::size_t index = 0; index < out.size(); ++index) {
    const std::uint64_t position = order(base + index);
    const auto source = static_cast<std::size_t>(std::upper_bound(first_start.begin(), first_start.end(), position) -
                                                 first_start.begin() - 1);
    out[index] = {static_cast<std::int32_t>(source), static_cast<std::int64_t>(position - first_start[source])};
  }
}

void WindowSampler::draw_interleaved(const Stretch& stretch, std::uint64_t offset, std::uint64_t first,
                                     std::span<Window> out) const {
  // Each source goes on through its own epochs: its draws before the first
  // sample here are counted in closed form, then the samples are dealt.
  const Count start = stretch.first_ordinal + Count{offset} * stretch.segment.global_batch + first;
  std::vector<Count> drawn(stretch.cursors.size());
  stretch.deal->counts(stretch.first_ordinal, start - stretch.first_ordinal, drawn);
  // A source's draws in one call span at most two of its epochs (G <= N_j).
  struct Order {
    std::size_t source;
    std::uint64_t epoch;
    KeyedPermutation permutation;
  };
  std::vector<Order> orders;
  for (std::size_t index = 0; index < out.size(); ++index) {
    const std::size_t source = stretch.deal->source_of(start + index);
    const std::uint64_t starts = stretch.segment.starts[source];
    const Cursor& cursor = stretch.cursors[source];
    const Count total = cursor.taken + drawn[source]++;
    const std::uint64_t epoch = cursor.epoch + static_cast<std::uint64_t>(total / starts);
    auto order = std::find_if(orders.begin(), orders.end(),
                              [&](const Order& made) { return made.source == source && made.epoch == epoch; });
    if (order == orders.end()) {
      orders.push_back({source, epoch, permutation(starts, epoch, source + 1)});
      order = std::prev(orders.end());
    }
    const std::uint64_t position = order->permutation(static_cast<std::uint64_t>(total % starts));
    out[index] = {static_cast<std::int32_t>(source), static_cast<std::int64_t>(position)};
  }
}

void WindowSampler::draw_per_sample(const Stretch& stretch, std::uint64_t step, std::uint64_t first,
                                    std::span<Window> out) const {
  // The rule of states version 1 and 2: each sample picks its source, then
  // its start from that source's own permutation at the sample's place in
  // the global batch.
  const std::uint64_t batch = stretch.segment.global_batch;
  const std::vector<double>& cumulative = stretch.cumulative;
  std::vector<std::optional<KeyedPermutation>> orders(cumulative.size());
  for (std::size_t index = 0; index < out.size(); ++index) {
    const std::uint64_t sample = first + index;
    const double uniform = static_cast<double>(random(step, sample, kPurposeSource, 0) >> 11) * 0x1.0p-53;
    std::size_t source = 0;
    while (source + 1 < cumulative.size() && !(uniform < cumulative[source])) ++source;
    const std::uint64_t starts = stretch.segment.starts[source];
    const std::uint64_t steps_per_epoch = starts / batch;
    std::optional<KeyedPermutation>& order = orders[source];
    if (!order) order = permutation(starts, step / steps_per_epoch, source + 1);
    const std::uint64_t position = (*order)((step % steps_per_epoch) * batch + sample);
    out[index] = {static_cast<std::int32_t>(source), static_cast<std::int64_t>(position)};
  }
}

}  // namespace backplane::detail
