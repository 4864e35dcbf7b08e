// Strict UTF-8 (RFC 3629, and Rust's str::from_utf8): no overlong forms, no
// surrogates, nothing past U+10FFFF. The config guard, the safetensors header
// rule and the trace writer all need exactly this definition.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace backplane::detail {

struct Utf8Sequence {
  char32_t code_point;
  std::size_t length;  // bytes
};

// The sequence starting at text[at] (which must be inside `text`); nullopt
// for an invalid or truncated one.
std::optional<Utf8Sequence> decode_utf8(std::string_view text, std::size_t at) noexcept;

// Offset of the first byte that is not part of well-formed UTF-8.
std::optional<std::size_t> find_invalid_utf8(std::string_view text) noexcept;

// Appends a code point of at most U+10FFFF (not a surrogate) as UTF-8.
void append_utf8(std::string& out, char32_t code_point);

}  // namespace backplane::detail
