// serde_json's number parser, reproduced operation for operation: its float
// is the significand times (or divided by) a power of ten, rounded twice,
// which differs from a correctly rounded strtod near the top of the range, and
// the header dialect must refuse exactly the numbers serde_json refuses
// ("number out of range").
#include "safetensors/json_number.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>

namespace backplane::safetensors::detail {
namespace {

// Powers of ten as Rust's literals 1e0..1e308 are: correctly rounded, which
// glibc's strtod also is.
const std::array<double, 309>& powers_of_ten() {
  static const std::array<double, 309> table = [] {
    std::array<double, 309> values{};
    for (std::size_t i = 0; i < values.size(); ++i) {
      values[i] = std::strtod(("1e" + std::to_string(i)).c_str(), nullptr);
    }
    return values;
  }();
  return table;
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// serde_json's overflow! macro: would a * 10 + b exceed limit?
template <typename T>
bool would_overflow(T a, T b, T limit) {
  return a >= limit / 10 && (a > limit / 10 || b > limit % 10);
}

struct NumberError {
  std::string_view message;
};

class NumberParser {
 public:
  NumberParser(std::string_view text, std::size_t start) : text_(text), pos_(start) {}

  JsonNumber parse() {
    if (peek_is('-')) {
      ++pos_;
      positive_ = false;
    }
    if (at_end()) fail("EOF while parsing a value");
    char first = text_[pos_++];
    std::uint64_t significand = 0;
    if (first == '0') {
      if (!at_end() && is_digit(text_[pos_])) fail("invalid number");  // one leading zero only
    } else if (first >= '1' && first <= '9') {
      significand = static_cast<std::uint64_t>(first - '0');
      while (!at_end() && is_digit(text_[pos_])) {
        auto digit = static_cast<std::uint64_t>(text_[pos_] - '0');
        if (would_overflow<std::uint64_t>(significand, digit, std::numeric_limits<std::uint64_t>::max())) {
          // Too long for u64: serde_json continues as a float, counting the
          // remaining integer digits as the exponent.
          std::int32_t exponent = 0;
          while (!at_end() && is_digit(text_[pos_])) {
            ++pos_;
            ++exponent;
          }
          if (peek_is('.')) return real(parse_decimal(significand, exponent));
          if (peek_is('e') || peek_is('E')) return real(parse_exponent(significand, exponent));
          return real(from_parts(significand, exponent));
        }
        ++pos_;
        significand = significand * 10 + digit;
      }
    } else {
      --pos_;
      fail("invalid number");
    }
    if (peek_is('.')) return real(parse_decimal(significand, 0));
    if (peek_is('e') || peek_is('E')) return real(parse_exponent(significand, 0));
    // A negative integer is i64 (or, for -0 and below i64::MIN, f64): never u64.
    if (!positive_) return real(static_cast<double>(significand));
    return JsonNumber{true, significand, static_cast<double>(significand)};
  }

  std::size_t position() const { return pos_; }

 private:
  [[noreturn]] static void fail(std::string_view message) { throw NumberError{message}; }

  bool at_end() const { return pos_ >= text_.size(); }
  bool peek_is(char c) const { return !at_end() && text_[pos_] == c; }

  void skip_digits() {
    while (!at_end() && is_digit(text_[pos_])) ++pos_;
  }

  JsonNumber real(double magnitude) const { return JsonNumber{false, 0, positive_ ? magnitude : -magnitude}; }

  // serde_json's f64_from_parts without the float_roundtrip feature.
  static double from_parts(std::uint64_t significand, std::int32_t exponent) {
    double value = static_cast<double>(significand);
    const auto& powers = powers_of_ten();
    while (true) {
      // Rust: exponent.wrapping_abs() as usize; i32::MIN stays out of the table.
      std::int64_t magnitude = exponent == std::numeric_limits<std::int32_t>::min()
                                   ? std::numeric_limits<std::int64_t>::max()
                                   : std::abs(static_cast<std::int64_t>(exponent));
      if (magnitude < static_cast<std::int64_t>(powers.size())) {
        if (exponent >= 0) {
          value *= powers[static_cast<std::size_t>(magnitude)];
          if (std::isinf(value)) fail("number out of range");
        } else {
          value /= powers[static_cast<std::size_t>(magnitude)];
        }
        return value;
      }
      if (value == 0.0) return value;
      if (exponent >= 0) fail("number out of range");
      value /= 1e308;
      exponent += 308;
    }
  }

  double parse_exponent(std::uint64_t significand, std::int32_t starting_exponent) {
    ++pos_;  // 'e' or 'E'
    bool positive_exponent = true;
    if (peek_is('+')) {
      ++pos_;
    } else if (peek_is('-')) {
      ++pos_;
      positive_exponent = false;
    }
    if (at_end()) fail("EOF while parsing a value");
    char first = text_[pos_++];
    if (!is_digit(first)) fail("invalid number");
    std::int32_t exponent = first - '0';
    while (!at_end() && is_digit(text_[pos_])) {
      std::int32_t digit = text_[pos_++] - '0';
      if (would_overflow<std::int32_t>(exponent, digit, std::numeric_limits<std::int32_t>::max())) {
        if (significand != 0 && positive_exponent) fail("number out of range");
        skip_digits();
        return 0.0;
      }
      exponent = exponent * 10 + digit;
    }
    std::int64_t final_exponent = positive_exponent ? static_cast<std::int64_t>(starting_exponent) + exponent
                                                    : static_cast<std::int64_t>(starting_exponent) - exponent;
    // Rust's saturating_add / saturating_sub.
    final_exponent = std::clamp<std::int64_t>(final_exponent, std::numeric_limits<std::int32_t>::min(),
                                              std::numeric_limits<std::int32_t>::max());
    return from_parts(significand, static_cast<std::int32_t>(final_exponent));
  }

  double parse_decimal(std::uint64_t significand, std::int32_t exponent_before_point) {
    ++pos_;  // '.'
    std::int32_t exponent_after_point = 0;
    while (!at_end() && is_digit(text_[pos_])) {
      auto digit = static_cast<std::uint64_t>(text_[pos_] - '0');
      if (would_overflow<std::uint64_t>(significand, digit, std::numeric_limits<std::uint64_t>::max())) {
        // Further digits cannot change the significand: serde ignores them.
        skip_digits();
        std::int32_t exponent = exponent_before_point + exponent_after_point;
        if (peek_is('e') || peek_is('E')) return parse_exponent(significand, exponent);
        return from_parts(significand, exponent);
      }
      ++pos_;
      significand = significand * 10 + digit;
      --exponent_after_point;
    }
    if (exponent_after_point == 0) fail(at_end() ? "EOF while parsing a value" : "invalid number");
    std::int32_t exponent = exponent_before_point + exponent_after_point;
    if (peek_is('e') || peek_is('E')) return parse_exponent(significand, exponent);
    return from_parts(significand, exponent);
  }

  std::string_view text_;
  std::size_t pos_;
  bool positive_ = true;
};

}  // namespace

JsonNumberScan scan_json_number(std::string_view text, std::size_t start) noexcept {
  NumberParser parser(text, start);
  JsonNumberScan scan;
  try {
    scan.number = parser.parse();
  } catch (const NumberError& error) {
    scan.error = error.message;
  }
  scan.end = parser.position();
  return scan;
}

}  // namespace backplane::safetensors::detail
