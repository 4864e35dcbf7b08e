// What the readers of the config file's tables share: positions and
// messages for one file being parsed, and how a value is named and written
// in messages. Includes toml++ (heavy): only the config readers include it.
#pragma once

#include "config/toml_guard.hpp"

#include <backplane/error.hpp>

#include <fmt/format.h>

#include <toml++/toml.h>

#include <filesystem>
#include <string>
#include <string_view>

namespace backplane::detail {

// Positions and messages for one file being parsed.
class Reader {
 public:
  Reader(const std::filesystem::path& source, const GuardedToml& guarded) : source_(source), guarded_(guarded) {}

  // "FILE:LINE:COLUMN" of `node`, columns in characters of the original text.
  std::string where(const toml::node& node) const {
    const toml::source_position begin = node.source().begin;
    if (begin.line == 0) return source_.string();
    return fmt::format("{}:{}:{}", source_.string(), begin.line, guarded_.original_column(begin.line, begin.column));
  }

  // Throws Error(kConfig, "FILE:LINE:COLUMN: <problem>").
  [[noreturn]] void fail(const toml::node& node, const std::string& problem) const {
    throw Error(ErrorCode::kConfig, fmt::format("{}: {}", where(node), problem));
  }

  // Throws as fail() when `text`, the value of the path-valued entry `key`,
  // holds a NUL: the C string the path becomes for the system ends there,
  // and a file other than the one written would be used.
  void refuse_nul_in_path(const toml::node& node, std::string_view key, std::string_view text) const;

  const std::filesystem::path& source() const { return source_; }

 private:
  const std::filesystem::path& source_;
  const GuardedToml& guarded_;
};

// `text` with NUL and other control characters written as \uXXXX, for
// messages that must show them.
std::string printable(std::string_view text);

inline void Reader::refuse_nul_in_path(const toml::node& node, std::string_view key, std::string_view text) const {
  if (text.find('\0') == std::string_view::npos) return;
  fail(node, fmt::format("'{}' = \"{}\" contains a NUL character (\\u0000), which no file path can hold",
                         printable(key), printable(text)));
}

// "table", "integer", "float", ... for messages.
std::string_view type_name(const toml::node& node);

// A float as text that still reads as a float: shortest round-trip digits,
// ".0" added to integral values, TOML's spelling of infinities and NaN.
std::string float_text(double value);

}  // namespace backplane::detail
