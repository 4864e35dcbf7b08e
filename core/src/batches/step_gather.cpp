// One step of a batch stream, made ready: its windows (drawn, and their
// pages advised, while the step `prefetch` before it was gathered), gathered
// on the pool's threads, issued to each device.
#include "batches/step_gather.hpp"

#include "placement/array_state.hpp"
#include "placement/gather.hpp"
#include "placement/transfer.hpp"
#include "util/bytes.hpp"
#include "util/page_advice.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <thread>

namespace backplane::detail {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

StepGather::StepGather(const StreamPlan& plan, GatherPool& pool, std::uint64_t trace_id)
    : plan_(plan),
      trace_id_(trace_id),
      pool_(pool),
      ahead_(static_cast<std::size_t>(plan.options().prefetch) + 1),
      drawn_until_(plan.first_step()) {
  // The threads run from the stream's start: a system that refuses them
  // fails the constructor, not a later next().
  pool_.start();
  for (std::vector<Window>& slot : ahead_) slot.reserve(static_cast<std::size_t>(plan.largest_batch()));
}

template <class Visit>
void StepGather::for_each_piece(std::int64_t step, std::span<const Window> windows, Visit&& visit) const {
  const std::int64_t global_batch = plan_.global_batch_at(step);
  const std::int64_t first = plan_.drawn_rows(step).first;
  for (std::size_t device = 0; device < plan_.targets().size(); ++device) {
    const RowRange rows = plan_.layout().rows(device, global_batch);
    visit(device, windows.subspan(static_cast<std::size_t>(rows.first - first), static_cast<std::size_t>(rows.count)));
  }
}

double StepGather::seconds() const noexcept {
  return static_cast<double>(nanoseconds_.load(std::memory_order_relaxed)) * 1e-9;
}

std::span<const Window> StepGather::windows_of(std::int64_t step) {
  const auto slot = [&](std::int64_t at) -> std::vector<Window>& {
    return ahead_[static_cast<std::size_t>(at) % ahead_.size()];
  };
  // The pages of the step `prefetch` ahead start arriving while this one is
  // gathered: cold windows are read concurrently, not one fault at a time.
  // (The first call draws and advises every step up to there.)
  // Only the pieces' own columns are advised: a rank that takes half of
  // each window reads half the bytes.
  const std::int64_t last = std::min(step + plan_.options().prefetch, kLastStep);
  for (; drawn_until_ <= last; ++drawn_until_) {
    std::vector<Window>& drawn = slot(drawn_until_);
    drawn.resize(static_cast<std::size_t>(plan_.drawn_rows(drawn_until_).count));  // within the largest's capacity
    plan_.draw(drawn_until_, drawn);
    const std::int64_t context = plan_.shape_at(drawn_until_).context;
    const std::uint64_t bytes = chunk_bytes(context);
    for_each_piece(drawn_until_, drawn, [&](std::size_t device, std::span<const Window> rows) {
      for (const std::byte* first : chunk_rows(device, rows, context)) advise_will_need({first, bytes});
    });
  }
  return slot(step);
}

PreparedStep StepGather::gather(std::int64_t step) {
  PreparedStep prepared;
  prepared.step = step;
  const Clock::time_point start = Clock::now();
  trace::Span gathering(trace::category::kBatchStream, trace::event::kGather, 0, start);
  const std::span<const Window> windows = windows_of(step);
  const std::int64_t context = plan_.shape_at(step).context;
  const DocumentIndex* documents = plan_.documents();
  for_each_piece(step, windows, [&](std::size_t device, std::span<const Window> rows) {
    PieceLayout layout;
    if (documents != nullptr) layout = layout_for(device, rows, context, step);
    prepared.arrays.push_back(gather_for(device, rows, context, step));
    if (documents != nullptr) prepared.documents.push_back(send_pieces(device, rows, layout, context, step));
  });
  prepared.issued = Clock::now();
  if (gathering.active()) {
    // What the step hands out, as stats().bytes counts it.
    std::uint64_t bytes = 0;
    for (const Array& array : prepared.arrays) bytes += array.nbytes();
    gathering.end({}, {{"stream", trace_id_}, {"step", step}, {"windows", windows.size()}, {"bytes", bytes}},
                  prepared.issued);
  } else {
    gathering.discard();
  }
  prepared.transfer = trace::Span(trace::category::kBatchStream, trace::event::kTransfer, 0, prepared.issued);
  const auto watch = [&](const Array& array) {
    const auto& arrival = ArrayAccess::state(array, "BatchStream").storage->arrival;
    if (arrival) prepared.arrivals.push_back(arrival);
  };
  for (const Array& array : prepared.arrays) watch(array);
  for (const DocumentPieces& pieces : prepared.documents) watch(pieces.cu_seqlens);
  const auto elapsed = std::chrono::duration_cast<std::chrono::nanoseconds>(prepared.issued - start);
  nanoseconds_.fetch_add(static_cast<std::uint64_t>(elapsed.count()), std::memory_order_relaxed);
  return prepared;
}

std::uint64_t StepGather::chunk_bytes(std::int64_t context) const noexcept {
  return plan_.window_bytes(plan_.layout().chunk_length(context));
}

std::vector<const std::byte*> StepGather::chunk_rows(std::size_t device, std::span<const Window> windows,
                                                     std::int64_t context) const {
  const PieceSpec& piece = plan_.layout().pieces()[device];
  const std::uint64_t chunk =
      static_cast<std::uint64_t>(plan_.layout().chunk_length(context)) * (dtype_bits(plan_.from()) / 8);
  std::vector<const std::byte*> rows;
  rows.reserve(windows.size() * piece.chunks.size());
  for (const Window& window : windows) {
    for (const std::int64_t index : piece.chunks) {
      rows.push_back(plan_.first_token(window) + static_cast<std::uint64_t>(index) * chunk);
    }
  }
  return rows;
}

Array StepGather::gather_for(std::size_t device, std::span<const Window> windows, std::int64_t context,
                             std::int64_t step) {
  const std::shared_ptr<LiveDevice>& target = plan_.targets()[device];
  const DType from = plan_.from();
  const DType to = plan_.to();
  const std::int64_t length = plan_.layout().chunk_length(context) + 1;
  const std::uint64_t window_bytes = chunk_bytes(context);
  const std::vector<const std::byte*> rows = chunk_rows(device, windows, context);
  const std::size_t per_window = plan_.layout().pieces()[device].chunks.size();
  std::vector<std::int64_t> shape{static_cast<std::int64_t>(windows.size()), length};
  if (per_window > 1) shape.insert(shape.begin() + 1, static_cast<std::int64_t>(per_window));
  const Extent extent = extent_of(to, shape, "BatchStream");
  read_bytes_.fetch_add(rows.size() * window_bytes, std::memory_order_relaxed);
  const RowGather gather{from, rows.size(), length, [&](std::byte* destination, DType as) {
                           const std::uint64_t row_out = static_cast<std::uint64_t>(length) * (dtype_bits(as) / 8);
                           pool_.run(rows.size(), [&](std::size_t begin, std::size_t end) {
                             const std::span<const std::byte* const> piece(rows.data() + begin, end - begin);
                             gather_rows(piece, from, length, destination + begin * row_out, as);
                           });
                           if (!plan_.options().release_pages) return;
                           // After the whole gather, so no thread re-faults what another dropped.
                           for (std::size_t index = 0; index < rows.size(); ++index) {
                             const StreamSource& source =
                                 plan_.sources()[static_cast<std::size_t>(windows[index / per_window].source)];
                             drop_pages({rows[index], window_bytes}, {source.data, source.array.nbytes()});
                           }
                         }};
  return send_rows(
      plan_.placement(), gather, target, to, std::move(shape), extent,
      [&] {
        return fmt::format("batch stream step {}: {} windows x {}{} {} ({}) to {}", step, windows.size(),
                           per_window > 1 ? fmt::format("{} x ", per_window) : std::string(), length, dtype_name(to),
                           describe_bytes(extent.bytes), target->selector());
      },
      trace::event::kBatch);
}

PieceLayout StepGather::layout_for(std::size_t device, std::span<const Window> windows, std::int64_t context,
                                   std::int64_t step) const {
  const std::vector<ColumnRange> columns = plan_.layout().columns(device, context);
  try {
    return plan_.documents()->layout(windows, columns, plan_.options().max_documents);
  } catch (const Error& error) {
    if (error.code() != ErrorCode::kOutOfRange) throw;
    throw Error(ErrorCode::kOutOfRange,
                fmt::format("BatchStream: step {} on {}: its {} windows cut into {}; raise max_documents (at most "
                            "rows x context = {}, which no step exceeds)",
                            step, plan_.targets()[device]->selector(), windows.size(), error.what(),
                            static_cast<std::int64_t>(windows.size()) * plan_.layout().piece_columns(context)));
  }
}

DocumentPieces StepGather::send_pieces(std::size_t device, std::span<const Window> windows, const PieceLayout& layout,
                                       std::int64_t context, std::int64_t step) {
  // cu_seqlens and position_ids in one int32 buffer, one copy: the first
  // C + 1 elements and the rows x L after them (L: the piece's columns of
  // x, T without a sequence axis), each a view of it.
  const std::shared_ptr<LiveDevice>& target = plan_.targets()[device];
  const auto offsets = static_cast<std::int64_t>(layout.cu_seqlens.size());
  const auto rows = static_cast<std::int64_t>(windows.size());
  const std::vector<ColumnRange> columns = plan_.layout().columns(device, context);
  const std::int64_t row_length = plan_.layout().piece_columns(context);
  const std::int64_t length = offsets + rows * row_length;
  std::vector<std::int64_t> shape{length};
  const Extent extent = extent_of(DType::kI32, shape, "BatchStream");
  const RowGather gather{DType::kI32, 1, length, [&](std::byte* destination, DType) {
                           auto* out = reinterpret_cast<std::int32_t*>(destination);
                           std::copy(layout.cu_seqlens.begin(), layout.cu_seqlens.end(), out);
                           pool_.run(windows.size(), [&](std::size_t begin, std::size_t end) {
                             plan_.documents()->positions(
                                 windows, begin, end, columns,
                                 out + offsets + static_cast<std::int64_t>(begin) * row_length);
                           });
                         }};
  const Array whole = send_rows(
      plan_.placement(), gather, target, DType::kI32, std::move(shape), extent,
      [&] {
        return fmt::format("batch stream step {}: document pieces of {} windows ({}) to {}", step, windows.size(),
                           describe_bytes(extent.bytes), target->selector());
      },
      trace::event::kBatchDocuments);
  DocumentPieces pieces;
  pieces.cu_seqlens = whole.slice(0, offsets);
  const ArrayState& state = ArrayAccess::state(whole, "BatchStream");
  auto positions = std::make_shared<ArrayState>(state);
  positions->shape = {rows, row_length};
  positions->offset = state.offset + static_cast<std::uint64_t>(offsets) * sizeof(std::int32_t);
  positions->elements = static_cast<std::uint64_t>(rows * row_length);
  positions->nbytes = positions->elements * sizeof(std::int32_t);
  pieces.position_ids = ArrayAccess::make(std::move(positions));
  pieces.max_seqlen = layout.max_seqlen;
  pieces.pieces = layout.pieces;
  return pieces;
}

}  // namespace backplane::detail
