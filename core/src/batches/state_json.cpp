// Reading a batch stream state's JSON (state_json.hpp).
#include "batches/state_json.hpp"

#include <backplane/batch_stream.hpp>
#include <backplane/error.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <span>

namespace backplane::detail {
namespace {

constexpr std::size_t kQuotedCharacters = 40;  // of a bad value, in a message
constexpr std::size_t kListedWeights = 8;      // of a weights list, in a message

// `text` cut to kQuotedCharacters, marked when cut.
std::string shortened(std::string text) {
  if (text.size() <= kQuotedCharacters) return text;
  text.resize(kQuotedCharacters - 3);
  return text + "...";
}

// Walks the JSON without building it, to refuse nesting deeper than
// kMaxJsonDepth and name the top-level field that holds it.
class DepthCheck final : public nlohmann::json_sax<Json> {
 public:
  bool too_deep = false;
  bool malformed = false;
  std::string field;  // the top-level key being read, when too_deep

  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return enter(); }
  bool key(string_t& name) override {
    if (depth_ == 1) field = name;
    return true;
  }
  bool end_object() override { return leave(); }
  bool start_array(std::size_t) override { return enter(); }
  bool end_array() override { return leave(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    malformed = true;
    return false;
  }

 private:
  bool enter() {
    too_deep = ++depth_ > BatchStreamState::kMaxJsonDepth;
    return !too_deep;
  }
  bool leave() {
    if (--depth_ == 0) field.clear();
    return true;
  }
  int depth_ = 0;
};

}  // namespace

[[noreturn]] void refuse_state(const std::string& why) {
  throw Error(ErrorCode::kInvalidFile, fmt::format("batch stream state: {}", why));
}

// A value as a message shows it: its JSON, ASCII only (control characters
// escaped), at most kQuotedCharacters long. Only values of a document whose
// depth is bounded get here, so dump()'s recursion is bounded too.
std::string excerpt(const Json& value) { return shortened(value.dump(-1, ' ', true)); }

// Weights as a resume message lists them: at most kListedWeights of them.
std::string listed(const std::vector<double>& weights) {
  const std::size_t shown = std::min(weights.size(), kListedWeights);
  const std::span<const double> head(weights.data(), shown);
  if (shown == weights.size()) return fmt::format("[{}]", fmt::join(head, ", "));
  return fmt::format("[{}, ...] ({} weights)", fmt::join(head, ", "), weights.size());
}

Json parse_state(std::string_view json) {
  DepthCheck check;
  (void)Json::sax_parse(json, &check);
  if (check.too_deep) {
    const std::string where = check.field.empty() ? "the state" : fmt::format("field {}", excerpt(check.field));
    // By value: binding the member to fmt's reference parameter would emit it
    // as an exported STB_GNU_UNIQUE symbol in unoptimised builds.
    constexpr int kDepth = BatchStreamState::kMaxJsonDepth;
    refuse_state(fmt::format("{} nests deeper than {} levels", where, kDepth));
  }
  if (check.malformed) refuse_state("not valid JSON");
  Json parsed = Json::parse(json, nullptr, false);
  if (parsed.is_discarded()) refuse_state("not valid JSON");
  if (!parsed.is_object()) refuse_state(fmt::format("a JSON {}, not an object", parsed.type_name()));
  return parsed;
}

const Json& field(const Json& object, const char* name, Json::value_t type, const char* type_name) {
  const auto found = object.find(name);
  if (found == object.end()) refuse_state(fmt::format("no field \"{}\"", name));
  const bool ok = found->type() == type ||
                  (type == Json::value_t::number_integer && found->type() == Json::value_t::number_unsigned);
  if (!ok) refuse_state(fmt::format("field \"{}\" is {}, not {}", name, found->type_name(), type_name));
  return *found;
}

std::uint64_t unsigned_field(const Json& object, const char* name) {
  return field(object, name, Json::value_t::number_unsigned, "a whole number >= 0").get<std::uint64_t>();
}

std::int64_t count_field(const Json& object, const char* name) {
  const Json& value = field(object, name, Json::value_t::number_integer, "a whole number");
  if (value.is_number_unsigned() && value.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX)) {
    refuse_state(fmt::format("field \"{}\" is {}, beyond 2^63 - 1", name, excerpt(value)));
  }
  const auto number = value.get<std::int64_t>();
  if (number < 0) refuse_state(fmt::format("field \"{}\" is {}, below 0", name, number));
  return number;
}

}  // namespace backplane::detail
