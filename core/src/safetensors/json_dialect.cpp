// A strict parser for the header's JSON, agreeing with serde_json + serde's
// derive for the reference's types rather than with JSON in general:
//
// - The top level is an object (a struct with a flattened map: serde uses
//   deserialize_map, so an array is refused there).
// - `__metadata__` is null or an object of string values; given twice it is
//   an error (duplicate struct field); a key repeated inside it: the last wins.
// - Every other key is a tensor (HashMap<String, TensorInfo>): a repeated
//   name keeps the last entry, but every entry must still be a valid
//   TensorInfo. A TensorInfo is an object (unknown fields ignored, duplicate
//   fields an error) or, as serde allows for structs, an array of exactly
//   [dtype, shape, data_offsets]. dtype is a variant name or a single-key
//   object {"NAME": null}. shape and data_offsets hold JSON integers that
//   serde_json reads as u64 (no sign, fraction or exponent, at most 2^64-1).
// - Tensor entries are buffered by serde (flatten) through deserialize_any,
//   so every number anywhere in them goes through serde_json's float parser,
//   which refuses numbers it rounds to infinity ("number out of range").
//   That parser is reproduced operation for operation below, because it
//   differs from a correctly rounded strtod near the top of the range.
#include "safetensors/json_dialect.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>

namespace backplane::safetensors::detail {
using namespace ::backplane::detail;
namespace {

struct DialectError {
  std::string message;
  std::size_t offset;
};

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

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  RawHeader parse_document(const std::function<void(std::size_t)>& consumed) {
    skip_whitespace();
    if (at_end()) fail("EOF while parsing a value");
    if (peek() != '{') fail("invalid type: expected an object at the top level");
    RawHeader header;
    header.tensors.reserve(estimated_members());
    ++pos_;  // depth 1
    bool seen_metadata = false;
    std::size_t released = 0;
    skip_whitespace();
    if (peek_is('}')) {
      ++pos_;
    } else {
      while (true) {
        std::string key = parse_key();
        if (key == "__metadata__") {
          if (seen_metadata) fail("duplicate field `__metadata__`");
          seen_metadata = true;
          header.metadata = parse_metadata();
        } else {
          RawTensor tensor = parse_tensor();
          header.tensors.push_back(TensorEntry{std::move(key), std::string(tensor.dtype->name), tensor.dtype->bits,
                                               std::move(tensor.shape), tensor.begin, tensor.end});
        }
        if (consumed && pos_ - released >= kReleaseStep) {
          released = pos_;
          consumed(pos_);
        }
        if (!next_member('}')) break;
      }
    }
    skip_whitespace();
    if (!at_end()) fail("trailing characters");
    keep_last_of_each_name(header.tensors);
    return header;
  }

 private:
  [[noreturn]] void fail(std::string message) const { throw DialectError{std::move(message), pos_}; }

  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return at_end() ? '\0' : text_[pos_]; }
  bool peek_is(char c) const { return !at_end() && text_[pos_] == c; }

  // JSON whitespace only: a form feed or a BOM is an error, as in serde_json.
  void skip_whitespace() {
    while (!at_end()) {
      char c = text_[pos_];
      if (c != ' ' && c != '\n' && c != '\t' && c != '\r') return;
      ++pos_;
    }
  }

  void enter(int depth) const {
    if (depth >= kMaxDepth) fail("recursion limit exceeded");
  }

  // After a member or element: true at ',' (and not a trailing comma), false at `close`.
  bool next_member(char close) {
    skip_whitespace();
    if (at_end()) fail(close == '}' ? "EOF while parsing an object" : "EOF while parsing a list");
    char c = text_[pos_];
    if (c == close) {
      ++pos_;
      return false;
    }
    if (c != ',') fail(close == '}' ? "expected `,` or `}`" : "expected `,` or `]`");
    ++pos_;
    skip_whitespace();
    if (peek_is(close)) fail("trailing comma");
    return true;
  }

  // An object key and its ':'; the cursor is at the key (whitespace skipped).
  std::string parse_key() {
    skip_whitespace();
    if (at_end()) fail("EOF while parsing an object");
    if (peek() != '"') fail("key must be a string");
    std::string key = parse_string();
    skip_whitespace();
    if (at_end()) fail("EOF while parsing an object");
    if (peek() != ':') fail("expected `:`");
    ++pos_;
    return key;
  }

  void parse_literal(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) {
      // serde_json reports the first byte that differs, or the end.
      while (!at_end() && !word.empty() && text_[pos_] == word.front()) {
        ++pos_;
        word.remove_prefix(1);
      }
      fail(at_end() ? "EOF while parsing a value" : "expected ident");
    }
    pos_ += word.size();
  }

  unsigned parse_hex4() {
    unsigned value = 0;
    for (int i = 0; i < 4; ++i) {
      if (at_end()) fail("EOF while parsing a string");
      char c = text_[pos_++];
      unsigned digit = 0;
      if (c >= '0' && c <= '9') {
        digit = static_cast<unsigned>(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        digit = static_cast<unsigned>(c - 'a' + 10);
      } else if (c >= 'A' && c <= 'F') {
        digit = static_cast<unsigned>(c - 'A' + 10);
      } else {
        fail("invalid escape");
      }
      value = value * 16 + digit;
    }
    return value;
  }

  static void append_utf8(std::string& out, unsigned code_point) {
    if (code_point < 0x80) {
      out += static_cast<char>(code_point);
    } else if (code_point < 0x800) {
      out += static_cast<char>(0xC0 | (code_point >> 6));
      out += static_cast<char>(0x80 | (code_point & 0x3F));
    } else if (code_point < 0x10000) {
      out += static_cast<char>(0xE0 | (code_point >> 12));
      out += static_cast<char>(0x80 | ((code_point >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (code_point & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (code_point >> 18));
      out += static_cast<char>(0x80 | ((code_point >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((code_point >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (code_point & 0x3F));
    }
  }

  // At the opening quote. Raw bytes are already valid UTF-8; control
  // characters must be escaped; \u escapes must pair surrogates.
  std::string parse_string() {
    ++pos_;
    std::string out;
    while (true) {
      std::size_t run = pos_;
      while (run < text_.size() && text_[run] != '"' && text_[run] != '\\' &&
             static_cast<unsigned char>(text_[run]) >= 0x20) {
        ++run;
      }
      out.append(text_, pos_, run - pos_);
      pos_ = run;
      if (at_end()) fail("EOF while parsing a string");
      char c = text_[pos_++];
      if (c == '"') return out;
      if (c != '\\') {
        --pos_;
        fail("control character (\\u0000-\\u001F) found while parsing a string");
      }
      if (at_end()) fail("EOF while parsing a string");
      switch (text_[pos_++]) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          unsigned unit = parse_hex4();
          if (unit >= 0xDC00 && unit <= 0xDFFF) fail("lone leading surrogate in hex escape");
          if (unit >= 0xD800 && unit <= 0xDBFF) {
            if (text_.substr(pos_, 2) != "\\u") fail("unexpected end of hex escape");
            pos_ += 2;
            unsigned low = parse_hex4();
            if (low < 0xDC00 || low > 0xDFFF) fail("lone leading surrogate in hex escape");
            unit = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00);
          }
          append_utf8(out, unit);
          break;
        }
        default: fail("invalid escape");
      }
    }
  }

  // --- Numbers, as serde_json parses them -------------------------------

  enum class NumberKind { kUnsigned, kOther };

  void skip_digits() {
    while (!at_end() && is_digit(text_[pos_])) ++pos_;
  }

  // serde_json's f64_from_parts without the float_roundtrip feature: only
  // whether it overflows matters here (the value itself is never used).
  void check_float(std::uint64_t significand, std::int32_t exponent) const {
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
        }
        return;  // a division never overflows
      }
      if (value == 0.0) return;
      if (exponent >= 0) fail("number out of range");
      value /= 1e308;
      exponent += 308;
    }
  }

  void parse_exponent(std::uint64_t significand, std::int32_t starting_exponent) {
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
        return;  // +-0.0
      }
      exponent = exponent * 10 + digit;
    }
    std::int64_t final_exponent = positive_exponent ? static_cast<std::int64_t>(starting_exponent) + exponent
                                                    : static_cast<std::int64_t>(starting_exponent) - exponent;
    // Rust's saturating_add / saturating_sub.
    final_exponent = std::clamp<std::int64_t>(final_exponent, std::numeric_limits<std::int32_t>::min(),
                                              std::numeric_limits<std::int32_t>::max());
    check_float(significand, static_cast<std::int32_t>(final_exponent));
  }

  void parse_decimal(std::uint64_t significand, std::int32_t exponent_before_point) {
    ++pos_;  // '.'
    std::int32_t exponent_after_point = 0;
    while (!at_end() && is_digit(text_[pos_])) {
      auto digit = static_cast<std::uint64_t>(text_[pos_] - '0');
      if (would_overflow<std::uint64_t>(significand, digit, std::numeric_limits<std::uint64_t>::max())) {
        // Further digits cannot change the significand: serde ignores them.
        skip_digits();
        std::int32_t exponent = exponent_before_point + exponent_after_point;
        if (peek_is('e') || peek_is('E')) return parse_exponent(significand, exponent);
        return check_float(significand, exponent);
      }
      ++pos_;
      significand = significand * 10 + digit;
      --exponent_after_point;
    }
    if (exponent_after_point == 0) fail(at_end() ? "EOF while parsing a value" : "invalid number");
    std::int32_t exponent = exponent_before_point + exponent_after_point;
    if (peek_is('e') || peek_is('E')) return parse_exponent(significand, exponent);
    check_float(significand, exponent);
  }

  // At '-' or a digit. `value` receives the number when it is a plain u64.
  NumberKind parse_number(std::uint64_t& value) {
    bool positive = true;
    if (peek_is('-')) {
      ++pos_;
      positive = false;
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
          if (peek_is('.')) {
            parse_decimal(significand, exponent);
          } else if (peek_is('e') || peek_is('E')) {
            parse_exponent(significand, exponent);
          } else {
            check_float(significand, exponent);
          }
          return NumberKind::kOther;
        }
        ++pos_;
        significand = significand * 10 + digit;
      }
    } else {
      --pos_;
      fail("invalid number");
    }
    if (peek_is('.')) {
      parse_decimal(significand, 0);
      return NumberKind::kOther;
    }
    if (peek_is('e') || peek_is('E')) {
      parse_exponent(significand, 0);
      return NumberKind::kOther;
    }
    value = significand;
    // A negative integer is i64 (or, for -0 and below i64::MIN, f64): never usize.
    return positive ? NumberKind::kUnsigned : NumberKind::kOther;
  }

  // --- Values -------------------------------------------------------------

  // Any JSON value, checked and dropped. `depth` is the depth a container
  // starting here would have.
  void skip_value(int depth) {
    skip_whitespace();
    if (at_end()) fail("EOF while parsing a value");
    char c = text_[pos_];
    switch (c) {
      case '{':
        enter(depth);
        ++pos_;
        skip_whitespace();
        if (peek_is('}')) {
          ++pos_;
          return;
        }
        do {
          parse_key();
          skip_value(depth + 1);
        } while (next_member('}'));
        return;
      case '[':
        enter(depth);
        ++pos_;
        skip_whitespace();
        if (peek_is(']')) {
          ++pos_;
          return;
        }
        do {
          skip_value(depth + 1);
        } while (next_member(']'));
        return;
      case '"': parse_string(); return;
      case 't': parse_literal("true"); return;
      case 'f': parse_literal("false"); return;
      case 'n': parse_literal("null"); return;
      default:
        if (c == '-' || is_digit(c)) {
          std::uint64_t ignored = 0;
          parse_number(ignored);
          return;
        }
        fail("expected value");
    }
  }

  // `__metadata__`: Option<HashMap<String, String>>, at depth 2.
  std::optional<Metadata> parse_metadata() {
    skip_whitespace();
    if (peek_is('n')) {
      parse_literal("null");
      return std::nullopt;
    }
    if (!peek_is('{')) fail("invalid type: `__metadata__` must be an object of strings or null");
    enter(2);
    ++pos_;
    Metadata metadata;
    skip_whitespace();
    if (peek_is('}')) {
      ++pos_;
      return metadata;
    }
    do {
      std::string key = parse_key();
      skip_whitespace();
      if (!peek_is('"')) fail("invalid type: `__metadata__` values must be strings");
      metadata[std::move(key)] = parse_string();  // a repeated key: the last wins
    } while (next_member('}'));
    return metadata;
  }

  // A dtype: "NAME", or {"NAME": null} (serde's externally tagged unit variant).
  const DTypeInfo* parse_dtype() {
    skip_whitespace();
    if (peek_is('"')) return lookup_dtype(parse_string());
    if (!peek_is('{')) fail("invalid type: dtype must be a string");
    enter(3);
    ++pos_;
    skip_whitespace();
    if (peek_is('}')) fail("invalid value: dtype object must have a single key");
    const DTypeInfo* dtype = lookup_dtype(parse_key());
    skip_whitespace();
    if (!peek_is('n')) fail("invalid type: dtype variant value must be null");
    parse_literal("null");
    if (next_member('}')) fail("invalid value: dtype object must have a single key");
    return dtype;
  }

  const DTypeInfo* lookup_dtype(const std::string& name) const {
    const DTypeInfo* dtype = find_dtype(name);
    if (dtype == nullptr) fail("unknown variant `" + name + "` for dtype");
    return dtype;
  }

  // Vec<usize> (exact_count 0 = any length) or (usize, usize), at depth 3.
  std::vector<std::uint64_t> parse_unsigned_list(const char* field, std::size_t exact_count) {
    skip_whitespace();
    if (!peek_is('[')) fail(std::string("invalid type: ") + field + " must be an array");
    enter(3);
    ++pos_;
    std::vector<std::uint64_t> values;
    skip_whitespace();
    if (peek_is(']')) {
      ++pos_;
    } else {
      do {
        skip_whitespace();
        if (!peek_is('-') && !is_digit(peek())) {
          fail(std::string("invalid type: ") + field + " must hold non-negative integers");
        }
        std::uint64_t value = 0;
        if (parse_number(value) != NumberKind::kUnsigned) {
          fail(std::string("invalid type: ") + field + " must hold integers in 0..2^64-1");
        }
        values.push_back(value);
      } while (next_member(']'));
    }
    if (exact_count != 0 && values.size() != exact_count) {
      fail("invalid length " + std::to_string(values.size()) + ": " + field + " needs " + std::to_string(exact_count) +
           " elements");
    }
    return values;
  }

  // TensorInfo, at depth 2: an object, or an array of the three fields in order.
  RawTensor parse_tensor() {
    skip_whitespace();
    RawTensor tensor;
    if (peek_is('[')) {
      enter(2);
      ++pos_;
      std::size_t count = 0;
      skip_whitespace();
      if (!peek_is(']')) {
        do {
          switch (count++) {
            case 0: tensor.dtype = parse_dtype(); break;
            case 1: tensor.shape = parse_unsigned_list("shape", 0); break;
            case 2: set_offsets(tensor, parse_unsigned_list("data_offsets", 2)); break;
            default: fail("invalid length: a tensor given as an array has 3 elements");
          }
        } while (next_member(']'));
      } else {
        ++pos_;
      }
      if (count != 3) fail("invalid length: a tensor given as an array has 3 elements");
      return tensor;
    }
    if (!peek_is('{')) fail("invalid type: a tensor entry must be an object");
    enter(2);
    ++pos_;
    bool has_dtype = false, has_shape = false, has_offsets = false;
    skip_whitespace();
    if (peek_is('}')) {
      ++pos_;
    } else {
      do {
        std::string key = parse_key();
        if (key == "dtype") {
          if (has_dtype) fail("duplicate field `dtype`");
          has_dtype = true;
          tensor.dtype = parse_dtype();
        } else if (key == "shape") {
          if (has_shape) fail("duplicate field `shape`");
          has_shape = true;
          tensor.shape = parse_unsigned_list("shape", 0);
        } else if (key == "data_offsets") {
          if (has_offsets) fail("duplicate field `data_offsets`");
          has_offsets = true;
          set_offsets(tensor, parse_unsigned_list("data_offsets", 2));
        } else {
          skip_value(3);  // unknown fields are ignored, but must be valid JSON
        }
      } while (next_member('}'));
    }
    if (!has_dtype) fail("missing field `dtype`");
    if (!has_shape) fail("missing field `shape`");
    if (!has_offsets) fail("missing field `data_offsets`");
    return tensor;
  }

  static void set_offsets(RawTensor& tensor, const std::vector<std::uint64_t>& offsets) {
    tensor.begin = offsets[0];
    tensor.end = offsets[1];
  }

  // An upper bound on the top-level members (so the tensors' vector is
  // allocated once, not grown to up to twice its size): the ':' at depth 1
  // outside strings. At most one per 16 bytes of text, the least a tensor
  // entry takes, whatever the text is.
  std::size_t estimated_members() const {
    std::size_t count = 0;
    int depth = 0;
    bool in_string = false;
    for (std::size_t index = pos_; index < text_.size(); ++index) {
      const char c = text_[index];
      if (in_string) {
        if (c == '\\') {
          ++index;
        } else if (c == '"') {
          in_string = false;
        }
        continue;
      }
      switch (c) {
        case '"': in_string = true; break;
        case '{':
        case '[': ++depth; break;
        case '}':
        case ']': --depth; break;
        case ':': count += depth == 1 ? 1 : 0; break;
        default: break;
      }
    }
    return std::min(count, text_.size() / 16 + 1);
  }

  // A repeated name keeps its last entry (serde's HashMap). Sorting positions
  // by name costs 4 bytes a tensor, where a hash map of the names cost more
  // than the tensors themselves.
  static void keep_last_of_each_name(std::vector<TensorEntry>& tensors) {
    if (tensors.size() < 2) return;
    std::vector<std::uint32_t> order(tensors.size());
    for (std::uint32_t index = 0; index < order.size(); ++index) order[index] = index;
    std::sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
      const int compared = tensors[a].name.compare(tensors[b].name);
      return compared != 0 ? compared < 0 : a < b;
    });
    bool repeated = false;
    for (std::size_t index = 0; index + 1 < order.size(); ++index) {
      if (tensors[order[index]].name == tensors[order[index + 1]].name) {
        tensors[order[index]].dtype.clear();  // marks an entry a later one replaces
        repeated = true;
      }
    }
    if (!repeated) return;
    std::erase_if(tensors, [](const TensorEntry& tensor) { return tensor.dtype.empty(); });
  }

  // How far the parser gets between calls of `consumed`.
  static constexpr std::size_t kReleaseStep = 8u << 20;

  std::string_view text_;
  std::size_t pos_ = 0;
};

}  // namespace

DialectResult parse_header_json(std::string_view text, const std::function<void(std::size_t)>& consumed) {
  DialectResult result;
  try {
    result.header = Parser(text).parse_document(consumed);
  } catch (const DialectError& error) {
    result.error = error.message;
    result.error_offset = error.offset;
  }
  return result;
}

}  // namespace backplane::safetensors::detail
