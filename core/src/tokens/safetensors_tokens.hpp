// A safetensors file as a token file: one integer tensor of it, flattened.
// The header is the safetensors module's (validated as docs/safetensors.md
// says); what is read here is which tensor holds the tokens.
#pragma once

#include "tokens/token_layout.hpp"

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace backplane::detail {

// True for a name ending in ".safetensors" (the format has no magic).
bool has_safetensors_name(std::span<const std::byte> prefix, std::string_view file) noexcept;

// 8 + the length field where the safetensors framing holds, else what
// `prefix` holds (min(prefix, file_size)).
std::uint64_t safetensors_header_bytes(std::span<const std::byte> prefix, std::uint64_t file_size) noexcept;

// The tensor `header.request.name`, or the file's only one. Throws
// Error(kNotFound) for a name the file lacks or a file with no tensors,
// Error(kInvalidArgument) for no name where there are several tensors,
// Error(kInvalidFile) for a tensor that is not integers, and what
// safetensors::parse_header throws for a header that does not hold.
TokenLayout read_safetensors_tokens(const TokenHeader& header);

}  // namespace backplane::detail
