// A guard between config file bytes and toml++ 3.3.0 (Debian 12's package).
//
// Why: toml++ 3.3.0's is_non_ascii_horizontal_whitespace() reaches
// TOML_UNREACHABLE (__builtin_unreachable, i.e. undefined behaviour) for
// 3,019 ordinary code points — U+00A1..U+0499 (Latin-1 letters such as
// 'é', Greek, Cyrillic, combining marks), U+2C5E..U+3057 (CJK punctuation,
// hiragana) and U+FB26..U+FEFE (Hebrew/Arabic presentation forms) — whenever
// the parser asks "is this whitespace?" about one of them: at the start of a
// line, after a key, in a recorded value, after a line-ending backslash in a
// multi-line string... Later toml++ releases fix it (that switch's default
// case returns false). The bug is in the compiled libtomlplusplus.so we link,
// so it cannot be patched from a header. Instead, before toml++ sees the text:
//
//   * outside strings and comments (where TOML allows only ASCII anyway) such
//     a code point is rejected: Error(kConfig) naming line, column and the
//     code point — toml++ would have reached the UB on it;
//   * in basic strings ("..." and """...""", keys included) it is replaced by
//     the equivalent escape \uXXXX, so the parsed value is byte-identical
//     (multi-line basic strings classify it after a line-ending backslash);
//   * in comments it is replaced by '?' (comments are discarded anyway);
//   * in literal strings ('...' and '''...'''), which have no escapes, it is
//     passed through: toml++ 3.3.0 never classifies literal-string content
//     (parse_literal_string only checks control characters and surrogates;
//     the classifier is reached from consume_leading_whitespace,
//     is_value_terminator, advance() while recording a bare key, and the
//     multi-line basic string line-continuation). This was also checked with
//     a UBSan build of header-only toml++ 3.3.0 for all 3,019 code points in
//     single- and multi-line literal strings as values, keys and array items.
//     Rejecting them instead would refuse paths like '/home/jürgen/plugins'.
//
// Nesting is bounded too (kMaxTomlNesting): toml++ recurses once per level
// of a dotted key or table header without a limit of its own, so a file of a
// few hundred kilobytes could overflow the stack of every process reading it.
//
// The input is also validated as strict UTF-8 first (no overlong forms,
// surrogates or code points past U+10FFFF), so toml++ only sees valid UTF-8.
//
// The code-point part can go once the toml++ in use carries the upstream fix;
// the UTF-8 and nesting checks stay.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace backplane::detail {

// The deepest nesting of tables, arrays and inline tables a config may use.
inline constexpr std::size_t kMaxTomlNesting = 128;

// True for exactly the code points on which toml++ 3.3.0's
// is_non_ascii_horizontal_whitespace() reaches its unreachable default case.
bool hits_toml_whitespace_bug(char32_t code_point) noexcept;

class GuardedToml {
 public:
  // Validates and rewrites `text` (see above). A UTF-8 byte order mark at the
  // start is dropped (toml++ would skip it too). Throws Error(kConfig) with
  // "SOURCE:LINE:COLUMN: ..." on invalid UTF-8, an unfixable code point or
  // nesting deeper than kMaxTomlNesting.
  GuardedToml(std::string_view text, const std::filesystem::path& source);

  // The text to hand to toml++: outside literal strings it holds no code
  // point that hits_toml_whitespace_bug() accepts.
  const std::string& text() const noexcept { return text_; }

  // Maps a 1-based column that toml++ reports on `line` of text() back to the
  // column in the original file (escapes make rewritten lines longer).
  std::size_t original_column(std::size_t line, std::size_t column) const noexcept;

 private:
  struct Escape {
    std::size_t line;
    std::size_t column;  // 1-based column of the '\' in text()
  };
  std::string text_;
  std::vector<Escape> escapes_;  // in text order
};

}  // namespace backplane::detail
