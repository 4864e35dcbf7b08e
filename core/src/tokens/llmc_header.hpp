// The llm.c / modded-nanogpt token shard: 256 little-endian int32 (magic,
// version, token count, the rest unused), then the tokens.
#pragma once

#include "tokens/token_layout.hpp"

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace backplane::detail {

inline constexpr std::uint64_t kLlmcHeaderBytes = 256 * 4;
inline constexpr std::uint32_t kLlmcMagicU16 = 20240520;  // version 1: uint16 tokens (GPT-2)
inline constexpr std::uint32_t kLlmcMagicU32 = 20240801;  // version 7: uint32 tokens (LLaMA 3)

// True when the first four bytes are one of the two magics.
bool has_llmc_magic(std::span<const std::byte> prefix) noexcept;

// The whole header, or the whole file where it is shorter (the reader then
// reports the truncation).
std::uint64_t llmc_header_bytes(std::span<const std::byte> prefix, std::uint64_t file_size) noexcept;

// Reads the header (`prefix` holds min(file_size, kLlmcHeaderBytes) bytes or
// more). The count is read as an unsigned 32-bit number: llm.c writes an
// int32, and reading it unsigned lets a shard hold up to 4 G tokens instead of
// 2 G. The file must be exactly the header plus count tokens. Throws
// Error(kInvalidFile) naming the file and the field: an unknown magic, the
// wrong version for the magic, a truncated header, a count that does not
// match the file's size.
TokenLayout read_llmc_header(std::span<const std::byte> prefix, std::uint64_t file_size, std::string_view file);

}  // namespace backplane::detail
