// The JSON tokens of a safetensors header, read as serde_json reads them:
// whitespace, strings, literals, numbers, the punctuation between members,
// and any value checked and dropped. What the values mean is the schema's
// (json_dialect.cpp).
#pragma once

#include "safetensors/json_number.hpp"

#include <cstddef>
#include <string>
#include <string_view>

namespace backplane::safetensors::detail {

// serde_json's recursion limit: a 128th nested array/object is refused
// (the top-level object counts as the first).
inline constexpr int kMaxDepth = 128;

// What every parse error carries: serde_json's message and the offset at
// which it noticed the problem.
struct JsonSyntaxError {
  std::string message;
  std::size_t offset;
};

// A cursor over already UTF-8-valid text; every error throws JsonSyntaxError
// at the cursor.
class JsonLexer {
 public:
  explicit JsonLexer(std::string_view text) : text_(text) {}

  std::string_view text() const { return text_; }
  std::size_t position() const { return pos_; }
  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return at_end() ? '\0' : text_[pos_]; }
  bool peek_is(char c) const { return !at_end() && text_[pos_] == c; }
  void advance() { ++pos_; }

  [[noreturn]] void fail(std::string message) const;

  // JSON whitespace only: a form feed or a BOM is an error, as in serde_json.
  void skip_whitespace();
  // Fails when a container opened at `depth` would pass serde_json's limit.
  void enter(int depth) const;
  // After a member or element: true at ',' (and not a trailing comma), false
  // at `close`.
  bool next_member(char close);
  // An object key and its ':'.
  std::string parse_key();
  void parse_literal(std::string_view word);
  // At the opening quote. Raw bytes are already valid UTF-8; control
  // characters must be escaped; \u escapes must pair surrogates.
  std::string parse_string();
  // At '-' or a digit.
  JsonNumber parse_number();
  // Any JSON value, checked and dropped. `depth` is the depth a container
  // starting here would have.
  void skip_value(int depth);

 private:
  unsigned parse_hex4();

  std::string_view text_;
  std::size_t pos_ = 0;
};

}  // namespace backplane::safetensors::detail
