// The framing of a safetensors file, written once: an 8-byte little-endian
// length, that many bytes of JSON header, then the data. The parser, both
// file readers and token-file detection ask this one function where the
// header ends.
#pragma once

#include <backplane/safetensors.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

namespace backplane::safetensors::detail {

struct HeaderFrame {
  // kHeaderTooSmall (a file shorter than the length field), kHeaderTooLarge
  // (a length above kMaxHeaderSize), kInvalidHeaderLength (a header running
  // past the end of the file); nothing when the frame holds.
  std::optional<Rule> broken;
  std::uint64_t length = 0;  // the length field; 0 for a file shorter than it
  std::uint64_t end = 0;     // 8 + length: where the data starts, when the frame holds
};

// The frame of a file of `file_size` bytes whose first bytes are `prefix`
// (at least min(8, file_size) of them; a shorter prefix reads as a file that
// short). No overflow: a length is compared with the limit before 8 is added.
HeaderFrame frame_header(std::span<const std::byte> prefix, std::uint64_t file_size) noexcept;

}  // namespace backplane::safetensors::detail
