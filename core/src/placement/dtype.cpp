#include <backplane/dtype.hpp>

namespace backplane {
namespace {

struct DTypeRow {
  DType dtype;
  std::string_view name;
  int bits;
  bool integer;
};

// One row per dtype, indexed by numeric value - 1.
constexpr DTypeRow kRows[] = {
    {DType::kU8, "U8", 8, true},
    {DType::kU16, "U16", 16, true},
    {DType::kU32, "U32", 32, true},
    {DType::kI32, "I32", 32, true},
    {DType::kI64, "I64", 64, true},
    {DType::kBool, "BOOL", 8, false},
    {DType::kI8, "I8", 8, true},
    {DType::kI16, "I16", 16, true},
    {DType::kU64, "U64", 64, true},
    {DType::kF16, "F16", 16, false},
    {DType::kBF16, "BF16", 16, false},
    {DType::kF32, "F32", 32, false},
    {DType::kF64, "F64", 64, false},
    {DType::kC64, "C64", 64, false},
    {DType::kF8_E5M2, "F8_E5M2", 8, false},
    {DType::kF8_E4M3, "F8_E4M3", 8, false},
    {DType::kF8_E8M0, "F8_E8M0", 8, false},
    {DType::kF8_E4M3FNUZ, "F8_E4M3FNUZ", 8, false},
    {DType::kF8_E5M2FNUZ, "F8_E5M2FNUZ", 8, false},
    {DType::kF4, "F4", 4, false},
    {DType::kF6_E2M3, "F6_E2M3", 6, false},
    {DType::kF6_E3M2, "F6_E3M2", 6, false},
};
static_assert(std::size(kRows) == kAllDTypes.size());

constexpr bool rows_in_order() {
  for (std::size_t index = 0; index < std::size(kRows); ++index) {
    if (static_cast<std::size_t>(kRows[index].dtype) != index + 1) return false;
    if (kAllDTypes[index] != kRows[index].dtype) return false;
  }
  return true;
}
static_assert(rows_in_order(), "kRows must follow the numeric values");

const DTypeRow* row(DType dtype) noexcept {
  const auto value = static_cast<std::int32_t>(dtype);
  if (value < 1 || value > static_cast<std::int32_t>(std::size(kRows))) return nullptr;
  return &kRows[value - 1];
}

}  // namespace

int dtype_bits(DType dtype) noexcept {
  const DTypeRow* found = row(dtype);
  return found == nullptr ? 0 : found->bits;
}

std::string_view dtype_name(DType dtype) noexcept {
  const DTypeRow* found = row(dtype);
  return found == nullptr ? std::string_view() : found->name;
}

std::optional<DType> dtype_from_name(std::string_view name) noexcept {
  for (const DTypeRow& entry : kRows) {
    if (entry.name == name) return entry.dtype;
  }
  return std::nullopt;
}

bool dtype_is_integer(DType dtype) noexcept {
  const DTypeRow* found = row(dtype);
  return found != nullptr && found->integer;
}

std::optional<std::uint64_t> dtype_storage_bytes(DType dtype, std::uint64_t elements) noexcept {
  const auto bits = static_cast<std::uint64_t>(dtype_bits(dtype));
  if (bits == 0) return std::nullopt;
  std::uint64_t total_bits = 0;
  if (__builtin_mul_overflow(elements, bits, &total_bits)) return std::nullopt;
  return total_bits / 8 + (total_bits % 8 != 0 ? 1 : 0);
}

}  // namespace backplane
