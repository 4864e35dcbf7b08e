// Fixed-width fields of file headers, read without alignment or host byte
// order assumptions, and the checked 64-bit arithmetic every size goes through.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace backplane::detail {

// The little-endian unsigned integer of sizeof(T) bytes at `offset`; the
// caller has checked that they are inside `bytes`.
template <class T>
T read_little_endian(std::span<const std::byte> bytes, std::size_t offset) noexcept {
  T value = 0;
  for (std::size_t index = sizeof(T); index-- > 0;) {
    value = static_cast<T>((value << 8) | std::to_integer<T>(bytes[offset + index]));
  }
  return value;
}

// a * b and a + b, or false when the result does not fit in 64 bits.
inline bool multiply_fits(std::uint64_t a, std::uint64_t b, std::uint64_t& out) noexcept {
  return !__builtin_mul_overflow(a, b, &out);
}
inline bool add_fits(std::uint64_t a, std::uint64_t b, std::uint64_t& out) noexcept {
  return !__builtin_add_overflow(a, b, &out);
}

}  // namespace backplane::detail
