// Where each target's piece of a step lies in the step's global batch
// [G, T]: a block of rows and one or two chunks of columns. A stream without
// a Layout is one too: rank r of world_size W with D devices gives device d
// the row block r D + d of W D, and every column.
#pragma once

#include <backplane/batch_stream.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace backplane::detail {

struct PieceSpec {
  std::int64_t row_block = 0;  // this piece's block of G / row_blocks rows
  std::int64_t row_blocks = 1;
  std::int64_t chunk_count = 1;      // T splits into this many equal chunks
  std::vector<std::int64_t> chunks;  // the piece's chunks, in order: one or two
};

// One step's rows of a piece: [first, first + count) of the global batch.
struct RowRange {
  std::int64_t first = 0;
  std::int64_t count = 0;
};

// Columns [begin, end) of a window's x (offsets from its first token): what
// a piece holds of each row, one range or two (head_tail).
struct ColumnRange {
  std::int64_t begin = 0;
  std::int64_t end = 0;
};

class StreamLayout {
 public:
  // Checks options.layout (or rank and world_size) against `targets`, the
  // number of devices the pieces go to; throws kInvalidArgument naming the
  // field and the values.
  StreamLayout(const BatchStreamOptions& options, std::size_t targets);

  // G / batch_size: world_size, or the batch axes' sizes multiplied.
  std::int64_t row_split() const noexcept { return row_split_; }
  // What splits the rows, for messages: "world_size 4", "batch axes dp x fsdp = 8".
  const std::string& row_split_label() const noexcept { return row_split_label_; }
  const std::vector<PieceSpec>& pieces() const noexcept { return pieces_; }
  // Whether some piece holds fewer than every column.
  bool splits_columns() const noexcept { return pieces_.front().chunk_count > 1; }

  // Piece `piece`'s rows in a step of global batch G.
  RowRange rows(std::size_t piece, std::int64_t global_batch) const noexcept;
  // The rows from the first piece's first to the last piece's last: what
  // this process draws of a step.
  RowRange hull(std::int64_t global_batch) const noexcept;
  // Piece `piece`'s columns of x, in the order its rows hold them (two
  // chunks that meet are one range).
  std::vector<ColumnRange> columns(std::size_t piece, std::int64_t context) const;
  // The columns of x a piece holds of each row: T, or T / cp with a
  // sequence axis (every piece holds as many).
  std::int64_t piece_columns(std::int64_t context) const noexcept {
    return chunk_length(context) * static_cast<std::int64_t>(pieces_.front().chunks.size());
  }
  // The tokens of one chunk of x (of T); 0 when T does not split into them.
  std::int64_t chunk_length(std::int64_t context) const noexcept;
  // Why a step of context T cannot be split into the pieces' columns, or ""
  // when it can (the rows always split: G is batch_size times row_split()).
  std::string refusal(std::int64_t context) const;

 private:
  void from_rank(const BatchStreamOptions& options, std::size_t targets);
  void from_layout(const Layout& layout, const BatchStreamOptions& options, std::size_t targets);

  std::int64_t row_split_ = 1;
  std::string row_split_label_;
  std::string column_split_label_;
  std::vector<PieceSpec> pieces_;
};

}  // namespace backplane::detail
