// Text helpers shared by the reader and the writer.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace backplane::safetensors::detail {

// Appends `text` as a JSON string the way serde_json writes one: only '"',
// '\\' and control characters are escaped (\b \f \n \r \t, else \u00xx in
// lower-case hex); '/', DEL and all non-ASCII text are written as they are.
inline void append_json_string(std::string& out, std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += '"';
  for (char c : text) {
    auto byte = static_cast<unsigned char>(c);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (byte < 0x20) {
          out += "\\u00";
          out += kHex[byte >> 4];
          out += kHex[byte & 0xF];
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

// A name as it appears in an error message: quoted, with control characters
// escaped so a hostile name cannot rewrite the terminal line.
inline std::string quote(std::string_view text) {
  std::string out;
  append_json_string(out, text);
  out.front() = '\'';
  out.back() = '\'';
  return out;
}

}  // namespace backplane::safetensors::detail
