// Builds safetensors files byte by byte for the tests, and checks verdicts.
#pragma once

#include <backplane/safetensors.hpp>

#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace backplane::testing {

inline std::vector<std::byte> bytes_of(std::string_view text) {
  const auto* data = reinterpret_cast<const std::byte*>(text.data());
  return {data, data + text.size()};
}

inline std::string le64(std::uint64_t value) {
  std::string out(8, '\0');
  for (std::size_t i = 0; i < 8; ++i) out[i] = static_cast<char>((value >> (8 * i)) & 0xFF);
  return out;
}

// 8-byte length of `header` (or `length` when given), the header, then `data`.
inline std::vector<std::byte> st_file(std::string_view header, std::string_view data = {},
                                      std::optional<std::uint64_t> length = std::nullopt) {
  std::string file = le64(length.value_or(header.size()));
  file.append(header);
  file.append(data);
  return bytes_of(file);
}

inline safetensors::Header parse(const std::vector<std::byte>& file) {
  return safetensors::parse_header(file, file.size(), "test.safetensors");
}

// The rule a file breaks, or nullopt when it is valid; `tensor` gets the
// tensor the error names, if any.
inline std::optional<safetensors::Rule> verdict(const std::vector<std::byte>& file,
                                                std::optional<std::string>* tensor = nullptr) {
  try {
    parse(file);
    return std::nullopt;
  } catch (const safetensors::FormatError& error) {
    if (tensor != nullptr) *tensor = error.tensor();
    return error.rule();
  }
}

inline std::string rule_text(std::optional<safetensors::Rule> rule) {
  return rule ? std::string(safetensors::rule_name(*rule)) : std::string("valid");
}

// A header with one tensor entry `entry` named "t", and `data` after it.
inline std::vector<std::byte> one_tensor(std::string_view entry, std::string_view data = {}) {
  return st_file("{\"t\":" + std::string(entry) + "}", data);
}

}  // namespace backplane::testing
