// Text from files and plugins as the terminal shows it (commands.hpp).
#include "commands.hpp"
#include "util/utf8.hpp"

#include <fmt/format.h>

namespace backplane::tools {
namespace {

// Bytes a terminal could act on: C0 controls, DEL, C1 controls (U+0080 to
// U+009F, which some terminals take as escapes) and bytes that are not
// UTF-8 (read as C1 controls by 8-bit terminals). Each is shown as \xNN.
template <class Visit>
void for_each_piece(std::string_view text, Visit visit) {
  for (std::size_t index = 0; index < text.size();) {
    const auto byte = static_cast<unsigned char>(text[index]);
    if (byte < 0x80) {
      visit(text.substr(index, 1), byte < 0x20 || byte == 0x7F);
      ++index;
      continue;
    }
    const auto sequence = detail::decode_utf8(text, index);
    if (!sequence || sequence->code_point <= 0x9F) {
      visit(text.substr(index, 1), true);
      ++index;
    } else {
      visit(text.substr(index, sequence->length), false);
      index += sequence->length;
    }
  }
}

}  // namespace

std::string printable(std::string_view text) {
  bool plain = !text.empty();
  for_each_piece(text, [&](std::string_view, bool escaped) { plain = plain && !escaped; });
  if (plain) return std::string(text);
  std::string out = "\"";
  for_each_piece(text, [&](std::string_view piece, bool escaped) {
    if (escaped) {
      for (const char c : piece) out += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
    } else if (piece == "\"" || piece == "\\") {
      out += '\\';
      out += piece;
    } else {
      out += piece;
    }
  });
  return out + "\"";
}

}  // namespace backplane::tools
