// The grammar of a typed option value, `<type>:<value>`, parsed in one place:
// the core checks a PJRT create option when it reads the config
// ([pjrt.NAME] create_options, Runtime::Options::sources), and the pjrt
// adapter parses the same text into what PJRT_Client_Create takes. Each words
// its own messages from the problem found here. Header-only.
//
//   int64       a 64-bit integer in decimal         int64:2
//   bool        true or false                       bool:false
//   float       a 32-bit float (PJRT's)             float:0.5
//   string      any text, colons included           string:a:b
//   int64_list  comma-separated 64-bit integers,    int64_list:1,-2,3
//               possibly none                       int64_list:
#ifndef BACKPLANE_PLUGIN_SDK_TYPED_VALUE_HPP
#define BACKPLANE_PLUGIN_SDK_TYPED_VALUE_HPP

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>
#include <variant>
#include <vector>

namespace backplane::plugin_sdk {

struct TypedValue {
  enum class Type { kString, kInt64, kBool, kFloat, kInt64List };
  Type type = Type::kString;
  std::string text;                    // kString
  std::int64_t integer = 0;            // kInt64
  bool boolean = false;                // kBool
  float real = 0;                      // kFloat
  std::vector<std::int64_t> integers;  // kInt64List
};

// Why a text is not a typed value, in parts a message is made of.
struct TypedValueProblem {
  enum class Kind {
    kNoType,       // no ':'
    kUnknownType,  // `type` is none of the five
    kBadValue,     // `value` does not parse as `type`: `part` is what failed (a list's element)
  };
  Kind kind = Kind::kNoType;
  std::string_view type;   // before the first ':'
  std::string_view value;  // after it
  std::string_view part;
};

inline constexpr std::string_view kTypedValueTypes = "int64, bool, float, string or int64_list";

namespace detail {

template <class Number>
bool parse_whole(std::string_view text, Number& number) {
  const auto [end, status] = std::from_chars(text.data(), text.data() + text.size(), number);
  return !text.empty() && status == std::errc{} && end == text.data() + text.size();
}

}  // namespace detail

// The value `text` holds, or why it holds none. Views in the problem point
// into `text`.
inline std::variant<TypedValue, TypedValueProblem> parse_typed_value(std::string_view text) {
  TypedValueProblem problem;
  const std::size_t colon = text.find(':');
  if (colon == std::string_view::npos) return problem;
  problem.type = text.substr(0, colon);
  problem.value = text.substr(colon + 1);
  const auto bad = [&](std::string_view part) {
    problem.kind = TypedValueProblem::Kind::kBadValue;
    problem.part = part;
    return problem;
  };
  TypedValue parsed;
  const std::string_view type = problem.type;
  const std::string_view value = problem.value;
  if (type == "string") {
    parsed.type = TypedValue::Type::kString;
    parsed.text = std::string(value);
  } else if (type == "int64") {
    parsed.type = TypedValue::Type::kInt64;
    if (!detail::parse_whole(value, parsed.integer)) return bad(value);
  } else if (type == "bool") {
    parsed.type = TypedValue::Type::kBool;
    if (value != "true" && value != "false") return bad(value);
    parsed.boolean = value == "true";
  } else if (type == "float") {
    parsed.type = TypedValue::Type::kFloat;
    if (!detail::parse_whole(value, parsed.real)) return bad(value);
  } else if (type == "int64_list") {
    parsed.type = TypedValue::Type::kInt64List;
    for (std::size_t start = 0; !value.empty() && start <= value.size();) {
      const std::size_t comma = std::min(value.find(',', start), value.size());
      const std::string_view element = value.substr(start, comma - start);
      std::int64_t integer = 0;
      if (!detail::parse_whole(element, integer)) return bad(element);
      parsed.integers.push_back(integer);
      start = comma + 1;
    }
  } else {
    problem.kind = TypedValueProblem::Kind::kUnknownType;
    return problem;
  }
  return parsed;
}

}  // namespace backplane::plugin_sdk

#endif  // BACKPLANE_PLUGIN_SDK_TYPED_VALUE_HPP
