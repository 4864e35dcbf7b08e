// Document starts and the pieces they cut a batch into (docs/batch-stream.md,
// "Documents").
#include "batches/document_index.hpp"

#include "batches/document_scan.hpp"

#include <backplane/error.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

namespace backplane::detail {
namespace {

[[noreturn]] void refuse(const std::string& why) {
  throw Error(ErrorCode::kInvalidArgument, fmt::format("BatchStream: documents: {}", why));
}

// FNV-1a 64 over 64-bit words (one multiply a word, not a byte: a list of
// ten million starts hashes in milliseconds): each source's count, then its
// starts.
std::uint64_t fingerprint(const std::vector<std::vector<std::int64_t>>& starts) {
  std::uint64_t hash = 0xCBF29CE484222325;
  const auto add = [&](std::uint64_t word) { hash = (hash ^ word) * 0x100000001B3; };
  for (const std::vector<std::int64_t>& list : starts) {
    add(list.size());
    for (const std::int64_t start : list) add(static_cast<std::uint64_t>(start));
  }
  return hash;
}

void check_given(const std::vector<std::int64_t>& starts, std::size_t source, std::uint64_t tokens) {
  for (std::size_t index = 0; index < starts.size(); ++index) {
    const std::int64_t start = starts[index];
    if (start < 0 || static_cast<std::uint64_t>(start) >= tokens) {
      refuse(fmt::format("start {} of source {} is {}, outside its {} tokens", index, source, start, tokens));
    }
    if (index > 0 && start <= starts[index - 1]) {
      refuse(fmt::format("the starts of source {} do not increase: start {} is {}, after {}", source, index, start,
                         starts[index - 1]));
    }
  }
}

// Calls piece(begin, end) for each run of columns [from, to) of the window
// starting at `first` that lies in one document, in order (offsets from the
// window's first token). The window starts at a document start.
template <class Piece>
void for_each_piece(std::span<const std::int64_t> starts, std::int64_t first, ColumnRange columns, Piece&& piece) {
  auto next = std::upper_bound(starts.begin(), starts.end(), first + columns.begin);
  std::int64_t begin = columns.begin;
  for (; next != starts.end() && *next < first + columns.end; ++next) {
    piece(begin, *next - first);
    begin = *next - first;
  }
  piece(begin, columns.end);
}

}  // namespace

DocumentIndex::DocumentIndex(const DocumentBoundaries& boundaries, std::span<const StreamSource> sources, DType dtype,
                             GatherPool& pool) {
  described_.kind = boundaries.kind;
  switch (boundaries.kind) {
    case DocumentBoundaries::Kind::kNone: refuse("no boundaries given");
    case DocumentBoundaries::Kind::kStarts:
      if (boundaries.starts.size() != sources.size()) {
        refuse(fmt::format("{} lists of starts for {} sources", boundaries.starts.size(), sources.size()));
      }
      for (std::size_t source = 0; source < sources.size(); ++source) {
        check_given(boundaries.starts[source], source, sources[source].tokens);
      }
      starts_ = boundaries.starts;
      described_.fingerprint = fingerprint(starts_);
      break;
    case DocumentBoundaries::Kind::kBos:
    case DocumentBoundaries::Kind::kEos: {
      const DocumentMarker marker =
          boundaries.kind == DocumentBoundaries::Kind::kBos ? DocumentMarker::kBos : DocumentMarker::kEos;
      described_.token = boundaries.token;
      try {
        for (const StreamSource& source : sources) {
          starts_.push_back(scan_document_starts(source.data, source.tokens, dtype, boundaries.token, marker, pool));
        }
      } catch (const Error& error) {
        // The scan's message names the marker and the dtype; the stream's name goes first.
        throw Error(error.code(), fmt::format("BatchStream: {}", error.what()));
      }
      break;
    }
  }
  for (const StreamSource& source : sources) tokens_.push_back(source.tokens);
}

std::uint64_t DocumentIndex::eligible(std::size_t source, std::int64_t context) const noexcept {
  const std::vector<std::int64_t>& list = starts_[source];
  // d begins a window that fits when d + context + 1 <= tokens; the list
  // increases, so those are a prefix of it.
  const std::uint64_t tokens = tokens_[source];
  const std::uint64_t fits_below = tokens > static_cast<std::uint64_t>(context) ? tokens - context : 0;
  const auto end = std::lower_bound(list.begin(), list.end(), fits_below, [](std::int64_t start, std::uint64_t bound) {
    return static_cast<std::uint64_t>(start) < bound;
  });
  return static_cast<std::uint64_t>(end - list.begin());
}

std::uint64_t DocumentIndex::count() const noexcept {
  std::uint64_t total = 0;
  for (const std::vector<std::int64_t>& list : starts_) total += list.size();
  return total;
}

PieceLayout DocumentIndex::layout(std::span<const Window> windows, std::span<const ColumnRange> columns,
                                  std::int64_t capacity) const {
  PieceLayout layout;
  layout.cu_seqlens.assign(static_cast<std::size_t>(capacity) + 1, 0);
  // The piece's tokens, row by row: each row's column ranges one after the
  // other. A range's first run is a piece even inside a document: the
  // tokens before it are not here.
  std::int64_t base = 0;
  for (const Window& window : windows) {
    for (const ColumnRange& range : columns) {
      for_each_piece(starts_[static_cast<std::size_t>(window.source)], window.start, range,
                     [&](std::int64_t begin, std::int64_t end) {
                       layout.max_seqlen = std::max(layout.max_seqlen, end - begin);
                       // Counted past the capacity too, so the error says how many.
                       if (++layout.pieces <= capacity) {
                         layout.cu_seqlens[static_cast<std::size_t>(layout.pieces)] =
                             static_cast<std::int32_t>(base + end - range.begin);
                       }
                     });
      base += range.end - range.begin;
    }
  }
  if (layout.pieces > capacity) {
    throw Error(ErrorCode::kOutOfRange,
                fmt::format("{} document pieces, more than max_documents = {}", layout.pieces, capacity));
  }
  std::fill(layout.cu_seqlens.begin() + layout.pieces + 1, layout.cu_seqlens.end(), static_cast<std::int32_t>(base));
  return layout;
}

void DocumentIndex::positions(std::span<const Window> windows, std::size_t begin, std::size_t end,
                              std::span<const ColumnRange> columns, std::int32_t* out) const {
  for (std::size_t row = begin; row < end; ++row) {
    const std::span<const std::int64_t> starts = starts_[static_cast<std::size_t>(windows[row].source)];
    const std::int64_t first = windows[row].start;
    for (const ColumnRange& range : columns) {
      // Each token's place in its document, counted in the whole window: a
      // range that starts inside a document continues its count.
      for_each_piece(starts, first, range, [&](std::int64_t from, std::int64_t to) {
        const auto at = std::upper_bound(starts.begin(), starts.end(), first + from);
        const std::int64_t document = std::max(*std::prev(at), first) - first;  // the window starts at a start
        std::iota(out + (from - range.begin), out + (to - range.begin), static_cast<std::int32_t>(from - document));
      });
      out += range.end - range.begin;
    }
  }
}

}  // namespace backplane::detail
