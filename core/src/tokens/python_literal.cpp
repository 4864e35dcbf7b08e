#include "tokens/python_literal.hpp"

#include <backplane/error.hpp>

#include <fmt/format.h>

#include <cctype>
#include <cstdint>

namespace backplane::detail {
namespace {

constexpr int kMaxDepth = 16;

class LiteralParser {
 public:
  LiteralParser(std::string_view text, std::string_view file, std::string_view what)
      : text_(text), file_(file), what_(what) {}

  PythonLiteral parse() {
    PythonLiteral value = parse_value(0);
    skip_space();
    if (at_ < text_.size()) fail("unexpected text after the end");
    return value;
  }

 private:
  [[noreturn]] void fail(std::string_view problem) const {
    throw Error(ErrorCode::kInvalidFile,
                fmt::format("{}: {} is not a Python literal: {} at offset {}", file_, what_, problem, at_));
  }

  void skip_space() {
    while (at_ < text_.size() &&
           (text_[at_] == ' ' || text_[at_] == '\t' || text_[at_] == '\n' || text_[at_] == '\r')) {
      ++at_;
    }
  }

  // The next character after whitespace, or '\0' at the end.
  char peek() {
    skip_space();
    return at_ < text_.size() ? text_[at_] : '\0';
  }

  bool take(char expected) {
    if (peek() != expected) return false;
    ++at_;
    return true;
  }

  bool take_word(std::string_view word) {
    if (text_.substr(at_, word.size()) != word) return false;
    const std::size_t end = at_ + word.size();
    // "Trueish" is a name, not True.
    if (end < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[end])) != 0 || text_[end] == '_')) {
      return false;
    }
    at_ = end;
    return true;
  }

  PythonLiteral parse_value(int depth) {
    const char next = peek();
    if (next == '\'' || next == '"') return parse_string();
    if (next == '-' || next == '+' || (next >= '0' && next <= '9')) return parse_integer();
    if (next == '(' || next == '[' || next == '{') {
      if (depth >= kMaxDepth) fail(fmt::format("containers nest deeper than {}", kMaxDepth));
      if (next == '{') return parse_dict(depth + 1);
      return parse_sequence(depth + 1);
    }
    PythonLiteral value;
    if (take_word("True")) {
      value.kind = PythonLiteral::Kind::kBoolean;
      value.truth = true;
      return value;
    }
    if (take_word("False")) {
      value.kind = PythonLiteral::Kind::kBoolean;
      return value;
    }
    if (take_word("None")) return value;
    if (next == '\0') fail("the text ends where a value is expected");
    fail("a value is expected");
  }

  PythonLiteral parse_string() {
    const char quote = text_[at_++];
    PythonLiteral value;
    value.kind = PythonLiteral::Kind::kString;
    while (true) {
      if (at_ >= text_.size()) fail("a string is not closed");
      const char c = text_[at_++];
      if (c == quote) return value;
      if (c == '\n') fail("a string runs past the end of its line");
      if (c == '\\') {
        if (at_ >= text_.size()) fail("a string is not closed");
        value.text += text_[at_++];
        continue;
      }
      value.text += c;
    }
  }

  PythonLiteral parse_integer() {
    PythonLiteral value;
    value.kind = PythonLiteral::Kind::kInteger;
    if (text_[at_] == '-' || text_[at_] == '+') {
      value.negative = text_[at_] == '-';
      ++at_;
      skip_space();  // Python allows "- 5"
    }
    const std::size_t first_digit = at_;
    while (at_ < text_.size() && text_[at_] >= '0' && text_[at_] <= '9') {
      const auto digit = static_cast<std::uint64_t>(text_[at_] - '0');
      if (value.magnitude > (UINT64_MAX - digit) / 10) {
        value.too_large = true;
        value.magnitude = UINT64_MAX;
      } else if (!value.too_large) {
        value.magnitude = value.magnitude * 10 + digit;
      }
      ++at_;
    }
    if (at_ == first_digit) fail("a digit is expected");
    // Python 2 wrote long integers with an L (headers of old .npy files).
    if (at_ < text_.size() && (text_[at_] == 'L' || text_[at_] == 'l')) ++at_;
    if (value.negative && value.magnitude == 0) value.negative = false;
    return value;
  }

  // "(...)" is a tuple when empty or when it holds a comma, else the
  // parenthesised value itself, as in Python; "[...]" is a list.
  PythonLiteral parse_sequence(int depth) {
    const char open = text_[at_++];
    const char close = open == '(' ? ')' : ']';
    PythonLiteral sequence;
    sequence.kind = open == '(' ? PythonLiteral::Kind::kTuple : PythonLiteral::Kind::kList;
    bool comma = false;
    while (!take(close)) {
      sequence.items.push_back(parse_value(depth));
      if (take(',')) {
        comma = true;
        continue;
      }
      if (!take(close)) fail(fmt::format("',' or '{}' is expected", close));
      break;
    }
    if (open == '(' && !comma && sequence.items.size() == 1) return std::move(sequence.items.front());
    return sequence;
  }

  PythonLiteral parse_dict(int depth) {
    ++at_;  // '{'
    PythonLiteral dict;
    dict.kind = PythonLiteral::Kind::kDict;
    while (!take('}')) {
      const char next = peek();
      if (next != '\'' && next != '"') fail("a string key is expected");
      std::string key = parse_string().text;
      if (!take(':')) fail("':' is expected after a key");
      PythonLiteral item = parse_value(depth);
      dict.keys.push_back(std::move(key));
      dict.items.push_back(std::move(item));
      if (take(',')) continue;
      if (!take('}')) fail("',' or '}' is expected");
      break;
    }
    return dict;
  }

  std::string_view text_;
  std::string_view file_;
  std::string_view what_;
  std::size_t at_ = 0;
};

}  // namespace

std::string_view python_type_name(PythonLiteral::Kind kind) noexcept {
  switch (kind) {
    case PythonLiteral::Kind::kString: return "str";
    case PythonLiteral::Kind::kInteger: return "int";
    case PythonLiteral::Kind::kBoolean: return "bool";
    case PythonLiteral::Kind::kNone: return "NoneType";
    case PythonLiteral::Kind::kTuple: return "tuple";
    case PythonLiteral::Kind::kList: return "list";
    case PythonLiteral::Kind::kDict: return "dict";
  }
  return "?";
}

PythonLiteral parse_python_literal(std::string_view text, std::string_view file, std::string_view what) {
  return LiteralParser(text, file, what).parse();
}

}  // namespace backplane::detail
