// The pieces of a batch stream's steps: the checks of a Layout and the row
// and column blocks each target's piece takes.
#include "batches/stream_layout.hpp"

#include <backplane/error.hpp>

#include <fmt/format.h>

#include <algorithm>

namespace backplane::detail {
namespace {

[[noreturn]] void refuse(const std::string& why) {
  throw Error(ErrorCode::kInvalidArgument, fmt::format("BatchStream: layout: {}", why));
}

std::string described(const std::vector<Layout::Axis>& mesh) {
  std::string text;
  for (const Layout::Axis& axis : mesh) {
    text += fmt::format("{}{}={}", text.empty() ? "" : " x ", axis.name, axis.size);
  }
  return text;
}

// The axes `names` lists, as indices into the mesh; refuses a name the mesh
// lacks or one already taken (by this list or the other). `taken` holds, per
// axis, the list that took it ("batch", "sequence"), or null.
std::vector<std::size_t> axes_of(const std::vector<std::string>& names, const char* what,
                                 const std::vector<Layout::Axis>& mesh, std::vector<const char*>& taken) {
  std::vector<std::size_t> axes;
  for (const std::string& name : names) {
    const auto found =
        std::find_if(mesh.begin(), mesh.end(), [&](const Layout::Axis& axis) { return axis.name == name; });
    if (found == mesh.end()) {
      refuse(fmt::format("{} axis '{}' is not an axis of the mesh ({})", what, name, described(mesh)));
    }
    const auto index = static_cast<std::size_t>(found - mesh.begin());
    if (taken[index] == what) refuse(fmt::format("{} axis '{}' is listed twice", what, name));
    if (taken[index] != nullptr) refuse(fmt::format("axis '{}' is in both {} and {}", name, taken[index], what));
    taken[index] = what;
    axes.push_back(index);
  }
  return axes;
}

}  // namespace

StreamLayout::StreamLayout(const BatchStreamOptions& options, std::size_t targets) {
  if (options.layout) {
    from_layout(*options.layout, options, targets);
  } else {
    from_rank(options, targets);
  }
}

void StreamLayout::from_rank(const BatchStreamOptions& options, std::size_t targets) {
  const auto devices = static_cast<std::int64_t>(targets);
  row_split_ = options.world_size;
  row_split_label_ = fmt::format("world_size {}", options.world_size);
  for (std::int64_t device = 0; device < devices; ++device) {
    pieces_.push_back({options.rank * devices + device, options.world_size * devices, 1, {0}});
  }
}

void StreamLayout::from_layout(const Layout& layout, const BatchStreamOptions& options, std::size_t targets) {
  if (options.rank != 0 || options.world_size != 1) {
    refuse(
        fmt::format("rank {} and world_size {} are given with a layout, whose ranks say where this process is; "
                    "leave them 0 and 1",
                    options.rank, options.world_size));
  }
  const std::vector<Layout::Axis>& mesh = layout.mesh;
  if (mesh.empty()) refuse("the mesh has no axes");
  std::int64_t positions = 1;
  for (std::size_t index = 0; index < mesh.size(); ++index) {
    const Layout::Axis& axis = mesh[index];
    if (axis.name.empty()) refuse(fmt::format("mesh axis {} has no name", index));
    if (axis.size < 1) refuse(fmt::format("mesh axis '{}' has size {}; sizes are at least 1", axis.name, axis.size));
    for (std::size_t earlier = 0; earlier < index; ++earlier) {
      if (mesh[earlier].name == axis.name) refuse(fmt::format("mesh axis '{}' is named twice", axis.name));
    }
    if (__builtin_mul_overflow(positions, axis.size, &positions)) {
      refuse(fmt::format("the mesh {} has more than 2^63 positions", described(mesh)));
    }
  }
  std::vector<const char*> taken(mesh.size(), nullptr);
  const std::vector<std::size_t> batch = axes_of(layout.batch, "batch", mesh, taken);
  const std::vector<std::size_t> sequence = axes_of(layout.sequence, "sequence", mesh, taken);
  if (layout.ranks.empty()) refuse("ranks is empty: give the mesh position of each piece this process takes");
  if (layout.ranks.size() != targets) {
    refuse(fmt::format("{} ranks for {} devices: give one mesh position per device", layout.ranks.size(), targets));
  }
  // A coordinate over the listed axes, row-major in their listed order.
  const auto coordinate = [&](std::int64_t rank, const std::vector<std::size_t>& axes) {
    std::int64_t value = 0;
    for (const std::size_t axis : axes) {
      std::int64_t stride = 1;
      for (std::size_t after = axis + 1; after < mesh.size(); ++after) stride *= mesh[after].size;
      value = value * mesh[axis].size + (rank / stride) % mesh[axis].size;
    }
    return value;
  };
  const auto extent = [&](const std::vector<std::size_t>& axes) {
    std::int64_t size = 1;
    std::string names;
    for (const std::size_t axis : axes) {
      size *= mesh[axis].size;
      names += fmt::format("{}{}", names.empty() ? "" : " x ", mesh[axis].name);
    }
    return std::pair{size, names};
  };
  const auto [rows, row_names] = extent(batch);
  const auto [columns, column_names] = extent(sequence);
  row_split_ = rows;
  row_split_label_ = batch.empty() ? "no batch axis (1)" : fmt::format("batch axes {} = {}", row_names, rows);
  const bool head_tail = layout.sequence_order == Layout::SequenceOrder::kHeadTail && columns > 1;
  column_split_label_ = head_tail ? fmt::format(
                                        "the 2 x {} = {} chunks of sequence_order head_tail (sequence axes "
                                        "{} = {})",
                                        columns, 2 * columns, column_names, columns)
                                  : fmt::format("the {} chunks of sequence axes {}", columns, column_names);
  for (const std::int64_t rank : layout.ranks) {
    if (rank < 0 || rank >= positions) {
      refuse(fmt::format("rank {} is not in [0, {}), the positions of the mesh {}", rank, positions, described(mesh)));
    }
    const std::int64_t column = coordinate(rank, sequence);
    PieceSpec piece{coordinate(rank, batch), rows, head_tail ? 2 * columns : columns, {column}};
    if (head_tail) piece.chunks.push_back(2 * columns - 1 - column);
    pieces_.push_back(std::move(piece));
  }
}

RowRange StreamLayout::rows(std::size_t piece, std::int64_t global_batch) const noexcept {
  const PieceSpec& spec = pieces_[piece];
  const std::int64_t count = global_batch / spec.row_blocks;
  return {spec.row_block * count, count};
}

RowRange StreamLayout::hull(std::int64_t global_batch) const noexcept {
  std::int64_t first = INT64_MAX;
  std::int64_t end = 0;
  for (std::size_t piece = 0; piece < pieces_.size(); ++piece) {
    const RowRange range = rows(piece, global_batch);
    first = std::min(first, range.first);
    end = std::max(end, range.first + range.count);
  }
  return {first, end - first};
}

std::vector<ColumnRange> StreamLayout::columns(std::size_t piece, std::int64_t context) const {
  const std::int64_t length = chunk_length(context);
  std::vector<ColumnRange> ranges;
  for (const std::int64_t chunk : pieces_[piece].chunks) {
    // head_tail's middle rank takes two chunks that meet: one range, so that
    // a document running across them is one piece.
    if (!ranges.empty() && ranges.back().end == chunk * length) {
      ranges.back().end += length;
    } else {
      ranges.push_back({chunk * length, (chunk + 1) * length});
    }
  }
  return ranges;
}

std::int64_t StreamLayout::chunk_length(std::int64_t context) const noexcept {
  const std::int64_t count = pieces_.front().chunk_count;
  return context % count == 0 ? context / count : 0;
}

std::string StreamLayout::refusal(std::int64_t context) const {
  if (chunk_length(context) == 0) {
    return fmt::format("context {} does not split into {}", context, column_split_label_);
  }
  return {};
}

}  // namespace backplane::detail
