// The guard that keeps input that hits toml++ 3.3.0's whitespace-classifier
// bug away from the parser (core/src/config/toml_guard.hpp).
#include <doctest/doctest.h>

#include <string>

#include "backplane/error.hpp"
#include "config/toml_guard.hpp"
#include "util/utf8.hpp"

using backplane::Error;
using backplane::ErrorCode;
using backplane::detail::GuardedToml;
using backplane::detail::hits_toml_whitespace_bug;

namespace {

std::string utf8(char32_t code_point) {
  std::string out;
  backplane::detail::append_utf8(out, code_point);
  return out;
}

std::string guarded(std::string_view text) { return GuardedToml(text, "g.toml").text(); }

std::string guard_error(std::string_view text) {
  try {
    GuardedToml guard(text, "g.toml");
  } catch (const Error& error) {
    CHECK(error.code() == ErrorCode::kConfig);
    return error.what();
  }
  FAIL("the guard accepted the text");
  return {};
}

// True when `text` holds a code point that triggers the toml++ bug.
bool holds_trigger(std::string_view text) {
  for (std::size_t at = 0; at < text.size(); ++at) {
    const auto byte = static_cast<unsigned char>(text[at]);
    if (byte < 0xC0) continue;
    char32_t code_point = 0;
    std::size_t length = byte >= 0xF0 ? 4 : byte >= 0xE0 ? 3 : 2;
    code_point = byte & (0x7F >> length);
    for (std::size_t i = 1; i < length && at + i < text.size(); ++i) {
      code_point = (code_point << 6) | (static_cast<unsigned char>(text[at + i]) & 0x3F);
    }
    if (hits_toml_whitespace_bug(code_point)) return true;
  }
  return false;
}

}  // namespace

TEST_SUITE("config") {
  TEST_CASE("[toml_guard] trigger set matches toml++ 3.3.0's unreachable case") {
    // Blocks with no switch case in is_non_ascii_horizontal_whitespace().
    CHECK(hits_toml_whitespace_bug(0xA7));    // '§', a Latin-1 letter
    CHECK(hits_toml_whitespace_bug(0x32A));   // a combining mark: bytes CC AA
    CHECK(hits_toml_whitespace_bug(0xFCFF));  // bytes EF B3 BF
    CHECK(hits_toml_whitespace_bug(0xE9));    // 'é'
    CHECK(hits_toml_whitespace_bug(0x3042));  // hiragana 'あ'
    // Whitespace toml++ does classify, and everything outside the blocks.
    for (char32_t fine : {0x20, 0x7F, 0xA0, 0x1680, 0x2000, 0x200B, 0x3000, 0xFEFF, 0xFF01, 0x4E2D, 0x1F600}) {
      CHECK_FALSE(hits_toml_whitespace_bug(fine));
    }
    std::size_t count = 0;
    for (char32_t code_point = 0; code_point <= 0x10FFFF; ++code_point) count += hits_toml_whitespace_bug(code_point);
    CHECK(count == 3019);  // U+00A1..U+0499, U+2C5E..U+3057 less U+3000, U+FB26..U+FEFE
  }

  TEST_CASE("[toml_guard] no trigger code point ever reaches toml++") {
    // Every code point of the affected range, in each context: a trigger is
    // rewritten to ASCII, passed through in literal strings (never classified)
    // or rejected where toml++ would classify it; anything else is left alone.
    std::size_t leaked = 0, changed = 0, accepted = 0;
    for (char32_t code_point = 0xA0; code_point <= 0xFEFF; ++code_point) {
      if (code_point >= 0xD800 && code_point <= 0xDFFF) continue;
      const std::string character = utf8(code_point);
      const std::string basic = guarded("k = \"" + character + "\"\n");
      const std::string multi = guarded("k = \"\"\"\\\n" + character + "\"\"\"\n");  // after a line-ending backslash
      const std::string comment = guarded("# " + character + "\n");
      leaked += holds_trigger(basic) + holds_trigger(multi) + holds_trigger(comment);
      // Literal strings have no escapes; toml++ never classifies their content.
      const std::string literal = "k = '" + character + "'\nm = '''\n" + character + "'''\n";
      changed += guarded(literal) != literal;
      if (hits_toml_whitespace_bug(code_point)) {
        for (const std::string& text : {character, "k = 1" + character, "k = 'a'" + character}) {
          try {
            guarded(text);  // toml++ would classify the character here
            ++accepted;
          } catch (const Error&) {
          }
        }
      } else {
        changed += basic != "k = \"" + character + "\"\n";
      }
    }
    CHECK(leaked == 0);
    CHECK(accepted == 0);
    CHECK(changed == 0);
  }

  TEST_CASE("[toml_guard] basic strings get an equivalent escape, comments a '?'") {
    CHECK(guarded("k = \"a\xEF\xB3\xBF\x62\"") == "k = \"a\\uFCFFb\"");
    CHECK(guarded("\"\xC3\xA9\" = 1") == "\"\\u00E9\" = 1");  // quoted key
    CHECK(guarded("k = 1 # J\xC3\xBCrgen") == "k = 1 # J?rgen");
    CHECK(guarded("k = \"#\xC3\xA9\"") == "k = \"#\\u00E9\"");        // '#' inside a string is no comment
    CHECK(guarded("k = \"\\\"\xC3\xA9\"") == "k = \"\\\"\\u00E9\"");  // escaped quote keeps the string open
    CHECK(guarded("k = \"\"\"a\"\"\"\"\" # \xC3\xA9") == "k = \"\"\"a\"\"\"\"\" # ?");  // """ plus two quotes closes
    CHECK(guarded("k = '''a''''' # \xC3\xA9") == "k = '''a''''' # ?");
    CHECK(guarded("k = 'x' # \xC3\xA9") == "k = 'x' # ?");
    CHECK(guarded("\xEF\xBB\xBFk = 1") == "k = 1");  // byte order mark dropped
  }

  TEST_CASE("[toml_guard] literal strings pass through; text outside strings names line, column, code point") {
    CHECK(guarded("a = 1\nk = '\xC3\xA9'") == "a = 1\nk = '\xC3\xA9'");
    CHECK(guarded("k = '''\n\xEF\xB3\xBF'''") == "k = '''\n\xEF\xB3\xBF'''");
    CHECK(guard_error("k = 'x'\xC3\xA9") ==
          "g.toml:1:8: unexpected character U+00E9; outside strings and comments TOML allows only ASCII");
    CHECK(guard_error("\xCC\xAA") ==
          "g.toml:1:1: unexpected character U+032A; outside strings and comments TOML allows only ASCII");
    CHECK(guard_error("k = \"\\\xC2\xA7\"").find("g.toml:1:7: invalid escape sequence: '\\' followed by U+00A7") == 0);
  }

  TEST_CASE("[toml_guard] invalid UTF-8 is rejected with its position") {
    CHECK(guard_error("k = \"\xFF\"") == "g.toml:1:6: invalid UTF-8 (byte 0xFF); config files must be UTF-8 text");
    CHECK(guard_error("\n\nk = \"\xC0\x80\"").find("g.toml:3:6: invalid UTF-8 (byte 0xC0)") == 0);      // overlong
    CHECK(guard_error("k = \"\xED\xA0\x80\"").find("invalid UTF-8 (byte 0xED)") != std::string::npos);  // surrogate
    CHECK(guard_error("k = \"\xF4\x90\x80\x80\"").find("invalid UTF-8 (byte 0xF4)") !=
          std::string::npos);                                                                     // > U+10FFFF
    CHECK(guard_error("k = \"\xE2\x82").find("invalid UTF-8 (byte 0xE2)") != std::string::npos);  // truncated
    CHECK(guarded("k = \"\xF0\x9F\x98\x80\"") == "k = \"\xF0\x9F\x98\x80\"");                     // U+1F600 passes
  }

  TEST_CASE("[toml_guard] columns map back to the original text") {
    const GuardedToml guard("k = \"\xC3\xA9\xC3\xA9\" y\nz = 1", "g.toml");
    // Rewritten line 1: k = "\u00E9\u00E9" y  ('y' at column 20; originally 10).
    CHECK(guard.original_column(1, 20) == 10);
    CHECK(guard.original_column(1, 6) == 6);  // the first escape maps to its character
    CHECK(guard.original_column(1, 9) == 6);  // inside the escape
    CHECK(guard.original_column(1, 5) == 5);  // before any escape
    CHECK(guard.original_column(2, 3) == 3);  // other lines are untouched
  }

  TEST_CASE("[toml_guard] nesting past the limit is refused with its position, before toml++ recurses") {
    const std::string limit_message =
        "tables nested more than 128 levels deep (table headers, dotted keys, arrays and inline tables count together)";
    // 128 levels pass, in every shape; the 129th names the character that opened it.
    std::string key(127, 'k');
    for (std::size_t i = 1; i < key.size(); i += 2) key[i] = '.';  // 64 segments: 64 tables as a header, 63 as a key
    CHECK_NOTHROW(guarded("[" + key + "]\n" + key + " = 1\n"));
    CHECK_NOTHROW(guarded("a" + std::string(128, '.') + "a = 1"));
    CHECK(guard_error("a" + std::string(129, '.') + "a = 1") == "g.toml:1:130: " + limit_message);
    CHECK(guard_error("\n[a" + std::string(128, '.') + "a]") == "g.toml:2:130: " + limit_message);
    CHECK(guard_error("[[a" + std::string(128, '.') + "a]]") == "g.toml:1:131: " + limit_message);
    CHECK(guard_error("a = " + std::string(129, '[')) == "g.toml:1:133: " + limit_message);
    CHECK(guard_error("a = " + std::string(129, '{')) == "g.toml:1:133: " + limit_message);
    // A table header's depth carries over to the keys below it.
    CHECK(guard_error("[" + key + "]\n" + key + ".k.k = 1") == "g.toml:2:130: " + limit_message);
    // Dots in strings are not nesting; dots in values and later lines do not add up.
    CHECK_NOTHROW(guarded("k = \"" + std::string(1000, '.') + "\"\n\"" + std::string(1000, '.') + "\" = 1"));
    std::string floats = "k = [";
    for (int i = 0; i < 1000; ++i) floats += "1.5,\n";
    CHECK_NOTHROW(guarded(floats + "]\n"));
  }
}
