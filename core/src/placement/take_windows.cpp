// take_windows: the training loop's batch sampler. The gather runs on the
// caller's thread straight into the destination (host-addressable devices) or
// into one staging buffer, then one host->device copy moves the whole batch.
#include "placement/array_state.hpp"
#include "placement/staging.hpp"
#include "util/bytes.hpp"
#include "util/log.hpp"

#include <fmt/format.h>

#include <cstring>
#include <type_traits>

namespace backplane {
using namespace detail;
namespace {

using detail::ArrayAccess;
using detail::ArrayState;
using detail::LiveDevice;

template <class Visit>
void visit_integer(DType dtype, Visit&& visit) {
  switch (dtype) {
    case DType::kU8: return visit(std::uint8_t{});
    case DType::kI8: return visit(std::int8_t{});
    case DType::kU16: return visit(std::uint16_t{});
    case DType::kI16: return visit(std::int16_t{});
    case DType::kU32: return visit(std::uint32_t{});
    case DType::kI32: return visit(std::int32_t{});
    case DType::kU64: return visit(std::uint64_t{});
    case DType::kI64: return visit(std::int64_t{});
    default: throw Error(ErrorCode::kInternal, fmt::format("{} is not an integer dtype", dtype_name(dtype)));
  }
}

// Converts `count` integers from `in` to `out`, both possibly unaligned (a
// memory-mapped tensor need not be aligned). Values wrap like a C++ cast
// when narrowing. The source goes through an aligned block so that the
// conversion is a loop of constant trip count over plain arrays: GCC
// vectorises that at -O2 (its cheap cost model refuses loops needing alias
// checks or a scalar epilogue), with unaligned vector loads and stores for
// the memcpys, on any x86-64 or other target.
template <class Source, class Destination>
void convert_row(const std::byte* in, std::byte* out, std::size_t count) {
  constexpr std::size_t kBlock = 256;
  alignas(64) Source source_block[kBlock] = {};
  std::size_t done = 0;
  for (; done + kBlock <= count; done += kBlock) {
    std::memcpy(source_block, in + done * sizeof(Source), sizeof(source_block));
    std::byte* row = out + done * sizeof(Destination);
    for (std::size_t position = 0; position < kBlock; ++position) {
      const auto converted = static_cast<Destination>(source_block[position]);
      std::memcpy(row + position * sizeof(Destination), &converted, sizeof(Destination));
    }
  }
  if (done == count) return;
  // The tail as one padded block, so that it is vectorised too (T = 1025 is
  // common: a context plus the next token).
  const std::size_t rest = count - done;
  alignas(64) Destination destination_block[kBlock];
  std::memcpy(source_block, in + done * sizeof(Source), rest * sizeof(Source));
  for (std::size_t position = 0; position < kBlock; ++position) {
    destination_block[position] = static_cast<Destination>(source_block[position]);
  }
  std::memcpy(out + done * sizeof(Destination), destination_block, rest * sizeof(Destination));
}

// Windows [offset, offset + length) of `source`, row after row into
// `destination`, converted when the dtypes differ (integers only).
void gather(const std::byte* source, DType from, std::span<const std::int64_t> offsets, std::int64_t length,
            std::byte* destination, DType to) {
  const auto count = static_cast<std::size_t>(length);
  if (from == to) {
    const std::size_t element = static_cast<std::size_t>(dtype_bits(from)) / 8;
    const std::size_t row = count * element;
    for (std::size_t index = 0; index < offsets.size(); ++index) {
      std::memcpy(destination + index * row, source + static_cast<std::size_t>(offsets[index]) * element, row);
    }
    return;
  }
  visit_integer(from, [&](auto source_zero) {
    visit_integer(to, [&](auto destination_zero) {
      using Source = decltype(source_zero);
      using Destination = decltype(destination_zero);
      for (std::size_t index = 0; index < offsets.size(); ++index) {
        convert_row<Source, Destination>(source + static_cast<std::size_t>(offsets[index]) * sizeof(Source),
                                         destination + index * count * sizeof(Destination), count);
      }
    });
  });
}

// convert_integers widens unsigned types to any of its wider types.
bool device_can_widen(DType from, DType to) {
  const bool source_ok = from == DType::kU8 || from == DType::kU16 || from == DType::kU32;
  const bool destination_ok = to == DType::kU16 || to == DType::kU32 || to == DType::kI32 || to == DType::kI64;
  return source_ok && destination_ok && dtype_bits(to) > dtype_bits(from);
}

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
  if (target->host_addressable()) {  // the gather is the transfer
    gather(tokens_data, from, offsets, length, block->address(), to);
    return detail::make_result(placement, std::move(target), std::move(block), nullptr, to, std::move(shape), extent);
  }

  const bool widen_on_device = to != from && target->converts_integers() && device_can_widen(from, to);
  const DType staged = widen_on_device ? from : to;
  const std::uint64_t staged_bytes = extent.elements * static_cast<std::uint64_t>(dtype_bits(staged) / 8);
  detail::StagingBuffer staging(target->pinned(), staged_bytes);
  gather(tokens_data, from, offsets, length, staging.data(), staged);

  std::string description =
      fmt::format("take_windows of {} windows x {} {} ({}) from {} to {}", batch, length, dtype_name(to),
                  describe_bytes(extent.bytes), source.device->selector(), target->selector());
  std::shared_ptr<Completion> arrival;
  if (widen_on_device) {
    std::shared_ptr<Block> narrow = target->memory().allocate(staged_bytes);
    arrival = placement.run(std::move(description), [target, block, narrow, staging, staged_bytes, from, to,
                                                     count = extent.elements]() {
      target->copy_to_device(narrow->buffer(), 0, staging.data(), staged_bytes);
      PluginEvent widened;
      try {
        widened = target->convert_integers(narrow->buffer(), static_cast<BP_IntegerType>(from), block->buffer(),
                                           static_cast<BP_IntegerType>(to), count);
      } catch (const Error& error) {
        // The capability is the plugin's in general; this device may still
        // lack it (no kernel for this GPU). The batch is not lost for that.
        if (error.code() != ErrorCode::kUnsupported) throw;
        if (target->stop_converting_integers()) {
          log(LogLevel::kWarn, "{}: widening integers on the host from now on: {}", target->selector(), error.what());
        }
        std::vector<std::byte> wide(count * static_cast<std::uint64_t>(dtype_bits(to) / 8));
        const std::int64_t whole[] = {0};
        gather(staging.data(), from, whole, static_cast<std::int64_t>(count), wide.data(), to);
        target->copy_to_device(block->buffer(), 0, wide.data(), wide.size());
        return;
      }
      if (std::optional<PluginFailure> failure = widened.wait()) {
        throw Error(failure->code, fmt::format("{}: convert_integers of {} elements: {}", target->selector(), count,
                                               failure->message));
      }
    });
  } else if (target->asynchronous()) {
    try {
      PluginEvent event = target->copy_to_device_async(block->buffer(), 0, staging.data(), extent.bytes);
      arrival = std::make_shared<Completion>(description, target, std::move(event),
                                             std::vector<std::shared_ptr<const void>>{staging.owner(), block});
    } catch (const Error& error) {
      arrival = Completion::failed(description, error);
    }
  } else {
    arrival = placement.run(std::move(description), [target, block, staging, bytes = extent.bytes]() {
      target->copy_to_device(block->buffer(), 0, staging.data(), bytes);
    });
  }
  return detail::make_result(placement, std::move(target), std::move(block), std::move(arrival), to, std::move(shape),
                             extent);
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
