// Element types of backplane arrays: every dtype safetensors defines.
//
// The numeric values are stable (the C API and files may store them) and are
// never renumbered; new dtypes get new numbers. U8, U16, U32, I32 and I64 use
// the numbers of BP_IntegerType in plugin.h so that the core can hand them to
// a backend's convert_integers unchanged. 0 is never a dtype.
//
// Sub-byte dtypes (F4: 4 bits, F6_E2M3 / F6_E3M2: 6 bits) are storage-only:
// arrays of them can be created, sliced (at whole-byte boundaries), copied and
// moved between devices, but take_windows and integer conversion refuse them.
// Their byte size is ceil(elements * bits / 8).
#ifndef BACKPLANE_DTYPE_HPP
#define BACKPLANE_DTYPE_HPP

#include <backplane/api.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

namespace backplane {

enum class DType : std::int32_t {
  kU8 = 1,
  kU16 = 2,
  kU32 = 3,
  kI32 = 4,
  kI64 = 5,
  kBool = 6,
  kI8 = 7,
  kI16 = 8,
  kU64 = 9,
  kF16 = 10,
  kBF16 = 11,
  kF32 = 12,
  kF64 = 13,
  kC64 = 14,  // complex of two F32
  kF8_E5M2 = 15,
  kF8_E4M3 = 16,
  kF8_E8M0 = 17,
  kF8_E4M3FNUZ = 18,
  kF8_E5M2FNUZ = 19,
  kF4 = 20,
  kF6_E2M3 = 21,
  kF6_E3M2 = 22,
};

// All dtypes, in numeric order (for tests, tables and the C API).
inline constexpr std::array<DType, 22> kAllDTypes = {
    DType::kU8,          DType::kU16, DType::kU32,     DType::kI32,     DType::kI64,     DType::kBool,
    DType::kI8,          DType::kI16, DType::kU64,     DType::kF16,     DType::kBF16,    DType::kF32,
    DType::kF64,         DType::kC64, DType::kF8_E5M2, DType::kF8_E4M3, DType::kF8_E8M0, DType::kF8_E4M3FNUZ,
    DType::kF8_E5M2FNUZ, DType::kF4,  DType::kF6_E2M3, DType::kF6_E3M2,
};

// Bits per element: 4 (F4), 6 (F6_*), 8 (BOOL, U8, I8, F8_*), 16, 32, 64 (C64).
// 0 for a value that is not a DType.
BACKPLANE_API int dtype_bits(DType dtype) noexcept;

// The safetensors name: "U16", "BF16", "F8_E4M3FNUZ"; "" for a non-DType.
BACKPLANE_API std::string_view dtype_name(DType dtype) noexcept;

// Inverse of dtype_name; case-sensitive ("u16" is not a dtype).
BACKPLANE_API std::optional<DType> dtype_from_name(std::string_view name) noexcept;

// True for the integer dtypes U8..U64 and I8..I64 (not BOOL).
BACKPLANE_API bool dtype_is_integer(DType dtype) noexcept;

// Bytes needed for `elements` elements: ceil(elements * bits / 8), or nullopt
// when that overflows 64 bits.
BACKPLANE_API std::optional<std::uint64_t> dtype_storage_bytes(DType dtype, std::uint64_t elements) noexcept;

}  // namespace backplane

#endif  // BACKPLANE_DTYPE_HPP
