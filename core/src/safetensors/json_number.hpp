// A JSON number read exactly as serde_json reads one (without its
// float_roundtrip feature). Internal; a pure function over bytes, so it can
// be fuzzed on its own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace backplane::safetensors::detail {

struct JsonNumber {
  // A plain integer (no sign, fraction or exponent) within u64: the only
  // numbers serde_json hands a u64 field.
  bool is_unsigned = false;
  std::uint64_t unsigned_value = 0;  // when is_unsigned
  // The number as serde_json's f64: not correctly rounded (see the .cpp), so
  // it may differ from strtod by an ulp or two.
  double value = 0.0;
};

// Exactly one of `number` and `error` is set. `end` is the offset just past
// the number, or where the error was noticed; `error` is serde_json's message.
struct JsonNumberScan {
  std::optional<JsonNumber> number;
  std::string_view error;
  std::size_t end = 0;
};

// Reads the number that starts at text[start]: "invalid number" unless that
// is '-' or a digit, "number out of range" for a number serde_json rounds to
// infinity. Stops at the first byte that cannot continue the number.
JsonNumberScan scan_json_number(std::string_view text, std::size_t start) noexcept;

}  // namespace backplane::safetensors::detail
