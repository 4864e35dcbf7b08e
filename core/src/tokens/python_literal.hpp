// The subset of Python literal syntax a NumPy .npy header is written in
// (numpy.lib.format writes repr() of a dict; numpy reads it back with
// ast.literal_eval): strings, integers, True / False / None, tuples, lists
// and dicts, with spaces, tabs and newlines between tokens.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace backplane::detail {

struct PythonLiteral {
  enum class Kind : std::uint8_t { kString, kInteger, kBoolean, kNone, kTuple, kList, kDict };
  Kind kind = Kind::kNone;
  std::string text;             // kString: the characters, escapes resolved to the escaped character
  std::uint64_t magnitude = 0;  // kInteger: |value| (saturates at UINT64_MAX, see `too_large`)
  bool negative = false;        // kInteger
  bool too_large = false;       // kInteger: |value| does not fit in 64 bits
  bool truth = false;           // kBoolean
  // kTuple, kList: the items; kDict: the values, keys[i] being the key of
  // items[i], in the order written. (Not pairs: std::pair of a type still
  // being defined is ill-formed, where std::vector of one is allowed.)
  std::vector<PythonLiteral> items;
  std::vector<std::string> keys;
};

// Python's name for a kind: "str", "int", "bool", "NoneType", "tuple", "list", "dict".
std::string_view python_type_name(PythonLiteral::Kind kind) noexcept;

// Parses `text` as one literal followed only by whitespace. Containers nest
// at most 16 deep (a hostile header cannot exhaust the stack). Dict keys
// must be strings. Throws Error(kInvalidFile) "FILE: <what> is not a Python
// literal: <problem> at offset N" (`what` names the text, e.g. "NumPy
// header").
PythonLiteral parse_python_literal(std::string_view text, std::string_view file, std::string_view what);

}  // namespace backplane::detail
