// Reading a batch stream state's JSON safely: nesting is bounded before a
// document is built, and messages quote at most a short prefix of a bad
// value, so a hostile state costs a short error, never a deep recursion or
// a huge message. state.cpp's field table reads through these.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace backplane::detail {

using Json = nlohmann::json;

// Throws Error(kInvalidFile, "batch stream state: " + why).
[[noreturn]] void refuse_state(const std::string& why);

// A value as a message shows it: its JSON, ASCII only (control characters
// escaped), at most 40 characters long.
std::string excerpt(const Json& value);
// Weights as a resume message lists them: at most 8 of them.
std::string listed(const std::vector<double>& weights);

// The state's JSON object; refuses malformed JSON, nesting deeper than
// BatchStreamState::kMaxJsonDepth (naming the top-level field), and a value
// that is not an object.
Json parse_state(std::string_view json);
// Field `name` of `object`, of `type` (an unsigned number passes for an
// integer); refuses a missing or mistyped field, naming it.
const Json& field(const Json& object, const char* name, Json::value_t type, const char* type_name);
std::uint64_t unsigned_field(const Json& object, const char* name);
// A whole number in [0, 2^63 - 1].
std::int64_t count_field(const Json& object, const char* name);

}  // namespace backplane::detail
