#include "safetensors/json_lexer.hpp"

#include "util/utf8.hpp"

namespace backplane::safetensors::detail {

void JsonLexer::fail(std::string message) const { throw JsonSyntaxError{std::move(message), pos_}; }

void JsonLexer::skip_whitespace() {
  while (!at_end()) {
    char c = text_[pos_];
    if (c != ' ' && c != '\n' && c != '\t' && c != '\r') return;
    ++pos_;
  }
}

void JsonLexer::enter(int depth) const {
  if (depth >= kMaxDepth) fail("recursion limit exceeded");
}

bool JsonLexer::next_member(char close) {
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

std::string JsonLexer::parse_key() {
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

void JsonLexer::parse_literal(std::string_view word) {
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

unsigned JsonLexer::parse_hex4() {
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

std::string JsonLexer::parse_string() {
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
        ::backplane::detail::append_utf8(out, unit);
        break;
      }
      default: fail("invalid escape");
    }
  }
}

JsonNumber JsonLexer::parse_number() {
  JsonNumberScan scan = scan_json_number(text_, pos_);
  pos_ = scan.end;
  if (!scan.number) fail(std::string(scan.error));
  return *scan.number;
}

void JsonLexer::skip_value(int depth) {
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
      if (c == '-' || (c >= '0' && c <= '9')) {
        parse_number();
        return;
      }
      fail("expected value");
  }
}

}  // namespace backplane::safetensors::detail
