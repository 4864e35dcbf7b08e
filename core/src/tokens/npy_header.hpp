// The NumPy .npy format (numpy.lib.format): the magic "\x93NUMPY", a major
// and minor version byte, the header's length (2 bytes little-endian in 1.0,
// 4 bytes in 2.0 and 3.0), the header (the repr() of a dict with 'descr',
// 'fortran_order' and 'shape'), then the array's bytes.
#pragma once

#include "tokens/token_layout.hpp"

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace backplane::detail {

// A header of an integer array is well under 200 bytes; the limit keeps a
// lying length field from making the loader read megabytes.
inline constexpr std::uint64_t kMaxNpyHeaderBytes = 1 << 20;

bool has_npy_magic(std::span<const std::byte> prefix) noexcept;

// Bytes from the start of the file to the end of the header, as far as the
// version and length fields tell (`prefix` holds min(file_size, 12) bytes or
// more); what `prefix` holds where they are unusable. At most `file_size`.
std::uint64_t npy_header_bytes(std::span<const std::byte> prefix, std::uint64_t file_size) noexcept;

// Reads the header: an integer descr, little-endian ('<') or of one byte
// ('|'); C order, or Fortran order when at most one dimension is above 1
// (the bytes are the same); the shape flattened; the array's bytes exactly
// what the file holds after the header. Throws Error(kInvalidFile) naming the
// file and the field for anything else (a truncated header, an unknown
// version, a header that is not the dict numpy writes, a big-endian, float or
// structured descr, a shape whose size does not match the file's).
TokenLayout read_npy_header(std::span<const std::byte> prefix, std::uint64_t file_size, std::string_view file);

}  // namespace backplane::detail
