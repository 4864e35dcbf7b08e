// take_windows: one batch of windows at given offsets, gathered on the
// caller's thread. It describes the batch as a gather of rows; the planner
// (placement/transfer.hpp) picks the route and issues the copy, as it does
// for device_put and the batch stream's steps.
#include "placement/array_state.hpp"
#include "placement/gather.hpp"
#include "placement/transfer.hpp"
#include "util/bytes.hpp"

#include <fmt/format.h>

#include <optional>
#include <vector>

namespace backplane {
namespace {

namespace trace = detail::trace;
using detail::ArrayAccess;
using detail::ArrayState;
using detail::describe_bytes;
using detail::gather_rows;
using detail::LiveDevice;
using detail::RowGather;

void check_windows(const ArrayState& tokens, std::span<const std::int64_t> offsets, std::int64_t length) {
  const std::int64_t size = tokens.shape[0];
  if (length < 0 || length > size) {
    throw Error(
        ErrorCode::kOutOfRange,
        fmt::format("take_windows: window length {} does not fit in the tokens array of {} elements", length, size));
  }
  const std::int64_t last_start = size - length;
  for (std::size_t index = 0; index < offsets.size(); ++index) {
    const std::int64_t offset = offsets[index];
    if (offset < 0 || offset > last_start) {
      throw Error(ErrorCode::kOutOfRange,
                  fmt::format("take_windows: window {} at offset {} with length {} runs outside the tokens array of "
                              "{} elements (offsets must be in 0..{})",
                              index, offset, length, size, last_start));
    }
  }
}

Array take_on(detail::Placement& placement, const Array& tokens, std::span<const std::int64_t> offsets,
              std::int64_t length, const Device& device, std::optional<DType> output) {
  const ArrayState& state = ArrayAccess::state(tokens, "take_windows");
  const auto& source = *state.storage;
  if (state.shape.size() != 1) {
    throw Error(ErrorCode::kUnsupported,
                fmt::format("take_windows: tokens must be 1-D, got shape [{}]", fmt::join(state.shape, ", ")));
  }
  if (source.host == nullptr) {
    throw Error(ErrorCode::kUnsupported,
                fmt::format("take_windows: the tokens live on {}, which is not host memory; keep them on a cpu device "
                            "(device_put or load them there) and sample from there",
                            source.device->selector()));
  }
  if (dtype_bits(state.dtype) % 8 != 0) {
    throw Error(ErrorCode::kUnsupported,
                fmt::format("take_windows: {} is a sub-byte storage dtype; windows need whole-byte elements",
                            dtype_name(state.dtype)));
  }
  const DType from = state.dtype;
  const DType to = output.value_or(from);
  if (to != from && (!dtype_is_integer(from) || !dtype_is_integer(to))) {
    throw Error(ErrorCode::kUnsupported, fmt::format("take_windows: cannot convert {} to {}; only integer dtypes "
                                                     "convert",
                                                     dtype_name(from), dtype_name(to)));
  }
  if (const std::string loss = detail::value_loss(from, to); !loss.empty()) {
    throw Error(ErrorCode::kInvalidArgument, "take_windows: " + loss);
  }
  check_windows(state, offsets, length);
  detail::wait_for(source);  // tokens may still be arriving from another device

  const auto batch = static_cast<std::int64_t>(offsets.size());
  std::vector<std::int64_t> shape{batch, length};
  const detail::Extent extent = detail::extent_of(to, shape, "take_windows");
  const std::byte* tokens_data = source.host + state.offset;

  std::shared_ptr<LiveDevice> target = placement.device(device);
  std::vector<const std::byte*> rows(offsets.size());
  const std::size_t element = static_cast<std::size_t>(dtype_bits(from)) / 8;
  for (std::size_t index = 0; index < offsets.size(); ++index) {
    rows[index] = tokens_data + static_cast<std::size_t>(offsets[index]) * element;
  }
  RowGather windows{from, offsets.size(), length, [&](std::byte* destination, DType as) {
                      // The gather alone, not the send after it.
                      auto gather = trace::Span::nested(trace::category::kGather, trace::event::kGather);
                      if (gather.active()) {
                        gather.arg({"windows", batch});
                        gather.arg({"length", length});
                        gather.arg({"device", target->selector()});
                        gather.arg({"from", dtype_name(from)});
                      }
                      gather_rows(rows, from, length, destination, as);
                      if (gather.active()) {
                        gather.arg({"bytes", extent.elements * static_cast<std::uint64_t>(dtype_bits(as) / 8)});
                        gather.arg({"to", dtype_name(as)});
                      }
                    }};
  return send_rows(
      placement, windows, target, to, std::move(shape), extent,
      [&] {
        return fmt::format("take_windows of {} windows x {} {} ({}) from {} to {}", batch, length, dtype_name(to),
                           describe_bytes(extent.bytes), source.device->selector(), target->selector());
      },
      trace::event::kTakeWindows);
}

}  // namespace

Array take_windows(Runtime& runtime, const Array& tokens, std::span<const std::int64_t> offsets, std::int64_t length,
                   const Device& device, std::optional<DType> output) {
  return take_on(*detail::placement_of(runtime), tokens, offsets, length, device, output);
}

Array take_windows(const Array& tokens, std::span<const std::int64_t> offsets, std::int64_t length,
                   const Device& device, std::optional<DType> output) {
  const ArrayState& state = ArrayAccess::state(tokens, "take_windows");
  const auto placement = state.storage->placement.lock();
  if (!placement) {
    throw Error(ErrorCode::kUnavailable,
                "take_windows: the Runtime that made the tokens array no longer exists; pass a Runtime");
  }
  return take_on(*placement, tokens, offsets, length, device, output);
}

}  // namespace backplane
