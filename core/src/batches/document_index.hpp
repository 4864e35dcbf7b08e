// The documents of a batch stream's sources, for document-aligned windows:
// each source's document starts in increasing order, how many of them begin
// a window that fits, and the pieces a batch's rows cut into.
// docs/batch-stream.md ("Documents") specifies both.
#pragma once

#include "batches/gather_pool.hpp"
#include "batches/stream_layout.hpp"
#include "batches/stream_source.hpp"

#include <backplane/batch_stream.hpp>
#include <backplane/dtype.hpp>

#include <cstdint>
#include <span>
#include <vector>

namespace backplane::detail {

// Where one device's batch cuts into document pieces (the host side of
// DocumentPieces): the C + 1 offsets of cu_seqlens, padded with rows * T.
struct PieceLayout {
  std::vector<std::int32_t> cu_seqlens;
  std::int64_t max_seqlen = 0;
  std::int64_t pieces = 0;
};

class DocumentIndex {
 public:
  // The document starts `boundaries` gives for `sources` (all of `dtype`):
  // given lists are checked (one per source, increasing, inside the source),
  // markers are scanned for on `pool`. Throws Error(kInvalidArgument) naming
  // `documents` for bad boundaries; `boundaries.kind` must not be kNone.
  DocumentIndex(const DocumentBoundaries& boundaries, std::span<const StreamSource> sources, DType dtype,
                GatherPool& pool);

  // Source j's document starts whose window of context + 1 tokens fits: the
  // first eligible(j, context) of starts(j), since the list increases.
  std::uint64_t eligible(std::size_t source, std::int64_t context) const noexcept;
  std::span<const std::int64_t> starts(std::size_t source) const noexcept { return starts_[source]; }
  std::uint64_t count() const noexcept;  // every source's starts
  // What the state records of the boundaries (a resume must match it).
  BatchStreamState::Documents described() const noexcept { return described_; }

  // The pieces of `windows` (one device's rows, each starting at a document
  // start) whose x holds `columns` of each row (one after the other), in
  // `capacity` + 1 offsets: a piece is a run of those tokens that lies in one
  // document and is contiguous in the window. Throws Error(kOutOfRange) when
  // they need more than `capacity` pieces, naming the count; the caller adds
  // the step and device.
  PieceLayout layout(std::span<const Window> windows, std::span<const ColumnRange> columns,
                     std::int64_t capacity) const;
  // position_ids of rows [begin, end) of `windows` into `out` (the columns'
  // tokens per row, from row `begin`'s first): each token's place in its
  // document, counted in the whole window.
  void positions(std::span<const Window> windows, std::size_t begin, std::size_t end,
                 std::span<const ColumnRange> columns, std::int32_t* out) const;

 private:
  std::vector<std::vector<std::int64_t>> starts_;
  std::vector<std::uint64_t> tokens_;  // each source's length
  BatchStreamState::Documents described_;
};

}  // namespace backplane::detail
