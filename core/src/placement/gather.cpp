// Gathering windows of host memory into one buffer, and sending a gathered
// batch to a device (see gather.hpp).
#include "placement/gather.hpp"

#include "util/log.hpp"

#include <fmt/format.h>

#include <cstring>

namespace backplane::detail {
namespace {

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

}  // namespace

void gather_rows(std::span<const std::byte* const> rows, DType from, std::int64_t length, std::byte* destination,
                 DType to) {
  const auto count = static_cast<std::size_t>(length);
  if (from == to) {
    const std::size_t row = count * (static_cast<std::size_t>(dtype_bits(from)) / 8);
    for (std::size_t index = 0; index < rows.size(); ++index) {
      std::memcpy(destination + index * row, rows[index], row);
    }
    return;
  }
  visit_integer(from, [&](auto source_zero) {
    visit_integer(to, [&](auto destination_zero) {
      using Source = decltype(source_zero);
      using Destination = decltype(destination_zero);
      for (std::size_t index = 0; index < rows.size(); ++index) {
        convert_row<Source, Destination>(rows[index], destination + index * count * sizeof(Destination), count);
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

DType staged_dtype(const LiveDevice& target, DType from, DType to) {
  return to != from && target.converts_integers() && device_can_widen(from, to) ? from : to;
}

Array send_batch(Placement& placement, const std::shared_ptr<LiveDevice>& target, std::shared_ptr<Block> block,
                 const StagingBuffer& staging, DType from, DType staged, DType to, std::vector<std::int64_t> shape,
                 const Extent& extent, std::string description, std::string_view trace_name) {
  const std::uint64_t staged_bytes = extent.elements * static_cast<std::uint64_t>(dtype_bits(staged) / 8);
  std::optional<TransferTrace> transfer;
  if (trace::enabled()) {
    const char* route = staged != to ? "widen_on_device" : target->asynchronous() ? "async" : "blocking";
    transfer =
        TransferTrace{"host_to_device", std::string(trace_name), route, staged_bytes, "host", target->selector()};
    transfer->nvtx = trace::Range(trace_name, staged_bytes);
  }
  std::shared_ptr<Completion> arrival;
  if (staged != to) {
    std::shared_ptr<Block> narrow = target->memory().allocate(staged_bytes);
    arrival = placement.run(
        std::move(description),
        [target, block, narrow, staging, staged_bytes, from, to, count = extent.elements]() {
          target->copy_to_device(narrow->buffer(), 0, staging.data(), staged_bytes);
          PluginEvent widened;
          trace::Scope widening("widening", "convert_integers");
          if (widening.active()) {
            widening.arg({"bytes", block->size()});
            widening.arg({"elements", count});
            widening.arg({"device", target->selector()});
            widening.arg({"from", dtype_name(from)});
            widening.arg({"to", dtype_name(to)});
          }
          try {
            widened = target->convert_integers(narrow->buffer(), static_cast<BP_IntegerType>(from), block->buffer(),
                                               static_cast<BP_IntegerType>(to), count);
          } catch (const Error& error) {
            // The capability is the plugin's in general; this device may still
            // lack it (no kernel for this GPU). The batch is not lost for that.
            if (error.code() != ErrorCode::kUnsupported) throw;
            if (target->stop_converting_integers()) {
              log(LogLevel::kWarn, "{}: widening integers on the host from now on: {}", target->selector(),
                  error.what());
            }
            std::vector<std::byte> wide(count * static_cast<std::uint64_t>(dtype_bits(to) / 8));
            const std::byte* const whole[] = {staging.data()};
            gather_rows(whole, from, static_cast<std::int64_t>(count), wide.data(), to);
            target->copy_to_device(block->buffer(), 0, wide.data(), wide.size());
            return;
          }
          widened.wait([&] { return fmt::format("{}: convert_integers of {} elements", target->selector(), count); });
        },
        std::move(transfer));
  } else if (target->asynchronous()) {
    try {
      PluginEvent event = target->copy_to_device_async(block->buffer(), 0, staging.data(), extent.bytes);
      arrival = std::make_shared<Completion>(description, target, std::move(event),
                                             std::vector<std::shared_ptr<const void>>{staging.owner(), block});
      if (transfer) arrival->trace_as(std::move(*transfer));
    } catch (const Error& error) {
      arrival = Completion::failed(description, error);
    }
  } else {
    arrival = placement.run(
        std::move(description),
        [target, block, staging, bytes = extent.bytes]() {
          target->copy_to_device(block->buffer(), 0, staging.data(), bytes);
        },
        std::move(transfer));
  }
  return make_result(placement, target, std::move(block), std::move(arrival), to, std::move(shape), extent);
}

}  // namespace backplane::detail
