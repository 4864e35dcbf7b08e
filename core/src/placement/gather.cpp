// Gathering windows of host memory into one buffer (see gather.hpp).
#include "placement/gather.hpp"

#include <fmt/format.h>

#include <array>
#include <cstring>
#include <vector>

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

bool is_signed(DType dtype) noexcept {
  return dtype == DType::kI8 || dtype == DType::kI16 || dtype == DType::kI32 || dtype == DType::kI64;
}

bool holds_every_value(DType from, DType to) noexcept {
  if (is_signed(from) == is_signed(to)) return dtype_bits(to) >= dtype_bits(from);
  return !is_signed(from) && dtype_bits(to) > dtype_bits(from);  // unsigned into a wider signed type
}

// "[0, 65535]": the values an integer dtype holds.
std::string value_range(DType dtype) {
  const int bits = dtype_bits(dtype);
  if (!is_signed(dtype)) return fmt::format("[0, {}]", bits == 64 ? UINT64_MAX : (std::uint64_t{1} << bits) - 1);
  const std::int64_t most = bits == 64 ? INT64_MAX : static_cast<std::int64_t>((std::uint64_t{1} << (bits - 1)) - 1);
  return fmt::format("[{}, {}]", -most - 1, most);
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

std::string value_loss(DType from, DType to) {
  if (holds_every_value(from, to)) return {};
  constexpr std::array kIntegers{DType::kU8,  DType::kI8,  DType::kU16, DType::kI16,
                                 DType::kU32, DType::kI32, DType::kU64, DType::kI64};
  std::vector<std::string_view> fitting;
  for (const DType candidate : kIntegers) {
    if (holds_every_value(from, candidate)) fitting.push_back(dtype_name(candidate));
  }
  return fmt::format(
      "dtype {} cannot hold every {} token ({} holds {}, {} only {}): a token outside would change "
      "value; ask for {}, or leave the dtype unset",
      dtype_name(to), dtype_name(from), dtype_name(from), value_range(from), dtype_name(to), value_range(to),
      fmt::join(fitting, ", "));
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

}  // namespace backplane::detail
