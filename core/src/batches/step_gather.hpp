// The gather of a batch stream: makes one step ready on the producer's
// thread. Each step's windows are drawn once, while the step `prefetch`
// before it is gathered (the first steps' all by the first gather): the draw
// advises the kernel of their pages, so cold pages arrive while the steps
// before are gathered, and the gather copies those same windows (on the
// pool's threads) and issues them to the devices.
#pragma once

#include "batches/gather_pool.hpp"
#include "batches/stream_plan.hpp"
#include "placement/completion.hpp"
#include "trace/trace.hpp"

#include <backplane/array.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace backplane::detail {

// One step, gathered and issued to its devices.
struct PreparedStep {
  std::int64_t step = 0;
  std::vector<Array> arrays;              // one per device, in the plan's order
  std::vector<DocumentPieces> documents;  // with documents: one per device
  // What the producer waits on to time the copies: holding these rather
  // than the arrays lets a batch's memory go back to the cache as soon as
  // the consumer drops it. Empty for host targets, where the gather was the
  // transfer.
  std::vector<std::shared_ptr<Completion>> arrivals;
  std::chrono::steady_clock::time_point issued;
  trace::Span transfer;  // from `issued` to the arrival
};

class StepGather {
 public:
  // Gathers the steps of `plan` from plan.first_step() on, on `pool` (the
  // stream's, which the plan scanned its documents on; started here if it
  // is not yet). `trace_id` numbers the stream in the trace (the queue's
  // transfer lanes carry the same number).
  StepGather(const StreamPlan& plan, GatherPool& pool, std::uint64_t trace_id);

  // Draws and advises the windows of the steps up to `step` + prefetch not
  // drawn yet, then gathers the windows of `step` and issues their copies.
  // Steps come in increasing order from the plan's first step, none past
  // kLastStep, one call at a time. Throws what the copies' issue throws.
  PreparedStep gather(std::int64_t step);

  // Time spent in gather() so far, summed over steps (not threads): the
  // draw, the advice, the gather and the issue. Any thread.
  double seconds() const noexcept;
  // Bytes gathered from the sources so far (each piece's own columns). Any thread.
  std::uint64_t read_bytes() const noexcept { return read_bytes_.load(std::memory_order_relaxed); }

 private:
  std::span<const Window> windows_of(std::int64_t step);
  // Calls visit(device, rows) for each target, with its rows of `windows`
  // (the drawn rows of `step`).
  template <class Visit>
  void for_each_piece(std::int64_t step, std::span<const Window> windows, Visit&& visit) const;
  // The bytes of one of a piece's chunks with its one-token overlap: what a
  // gathered row holds.
  std::uint64_t chunk_bytes(std::int64_t context) const noexcept;
  // Piece `device`'s columns of `windows` (its rows), gathered and issued.
  Array gather_for(std::size_t device, std::span<const Window> windows, std::int64_t context, std::int64_t step);
  // The first token of each of the piece's chunks of each window, row by
  // row: the rows RowGather copies, chunk_length(context) + 1 tokens each.
  std::vector<const std::byte*> chunk_rows(std::size_t device, std::span<const Window> windows,
                                           std::int64_t context) const;
  // The pieces of a device's windows, laid out before its tokens are sent
  // (so a step with too many fails before any copy).
  PieceLayout layout_for(std::size_t device, std::span<const Window> windows, std::int64_t context,
                         std::int64_t step) const;
  DocumentPieces send_pieces(std::size_t device, std::span<const Window> windows, const PieceLayout& layout,
                             std::int64_t context, std::int64_t step);

  const StreamPlan& plan_;
  const std::uint64_t trace_id_;
  GatherPool& pool_;
  // The windows of step s, drawn ahead, at ahead_[s % ahead_.size()]: the
  // step being gathered and the `prefetch` after it (each slot holds as many
  // as the largest step has, so a schedule allocates nothing per step).
  std::vector<std::vector<Window>> ahead_;
  std::int64_t drawn_until_;  // the first step not drawn yet
  std::atomic<std::uint64_t> nanoseconds_{0};
  std::atomic<std::uint64_t> read_bytes_{0};
};

}  // namespace backplane::detail
