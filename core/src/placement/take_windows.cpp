// take_windows: one batch of windows at given offsets. The gather runs on the
// caller's thread straight into the destination (host-addressable devices) or
// into one staging buffer, then one host->device copy moves the whole batch.
// The batch stream (batches/) gathers on worker threads with the same pieces.
#include "placement/array_state.hpp"
#include "placement/gather.hpp"
#include "placement/staging.hpp"
#include "util/bytes.hpp"

#include <fmt/format.h>

#include <optional>
#include <vector>

namespace backplane {
using namespace detail;
namespace {

using detail::ArrayAccess;
using detail::ArrayState;
using detail::LiveDevice;

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
  check_windows(state, offsets, length);
  detail::wait_for(source);  // tokens may still be arriving from another device

  const auto batch = static_cast<std::int64_t>(offsets.size());
  std::vector<std::int64_t> shape{batch, length};
  const detail::Extent extent = detail::extent_of(to, shape, "take_windows");
  const std::byte* tokens_data = source.host + state.offset;

  std::shared_ptr<LiveDevice> target = placement.device(device);
  std::shared_ptr<Block> block = target->memory().allocate(extent.bytes);
  std::vector<const std::byte*> rows(offsets.size());
  const std::size_t element = static_cast<std::size_t>(dtype_bits(from)) / 8;
  for (std::size_t index = 0; index < offsets.size(); ++index) {
    rows[index] = tokens_data + static_cast<std::size_t>(offsets[index]) * element;
  }
  std::optional<trace::Scope> gather;  // the gather alone, not the send after it
  gather.emplace("gather", "gather");
  if (gather->active()) {
    gather->arg({"windows", batch});
    gather->arg({"length", length});
    gather->arg({"device", target->selector()});
    gather->arg({"from", dtype_name(from)});
  }
  if (target->host_addressable()) {  // the gather is the transfer
    gather_rows(rows, from, length, block->address(), to);
    if (gather->active()) {
      gather->arg({"bytes", extent.bytes});
      gather->arg({"to", dtype_name(to)});
    }
    gather.reset();
    return detail::make_result(placement, std::move(target), std::move(block), nullptr, to, std::move(shape), extent);
  }

  const DType staged = staged_dtype(*target, from, to);
  detail::StagingBuffer staging(target->pinned(), extent.elements * static_cast<std::uint64_t>(dtype_bits(staged) / 8));
  gather_rows(rows, from, length, staging.data(), staged);
  if (gather->active()) {
    gather->arg({"bytes", extent.elements * static_cast<std::uint64_t>(dtype_bits(staged) / 8)});
    gather->arg({"to", dtype_name(staged)});
  }
  gather.reset();
  std::string description =
      fmt::format("take_windows of {} windows x {} {} ({}) from {} to {}", batch, length, dtype_name(to),
                  describe_bytes(extent.bytes), source.device->selector(), target->selector());
  return send_batch(placement, target, std::move(block), staging, from, staged, to, std::move(shape), extent,
                    std::move(description), "take_windows");
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
