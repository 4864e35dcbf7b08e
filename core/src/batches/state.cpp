// BatchStreamState as JSON: the format docs/batch-stream.md ("The state")
// describes. Reading is strict: every field present with its type, nothing
// guessed, so a state from another format version is refused, not misread.
#include "util/error_codes.hpp"

#include <backplane/batch_stream.hpp>
#include <backplane/error.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>

namespace backplane {
namespace {

constexpr const char* kFormat = "backplane.batch_stream";

[[noreturn]] void refuse(const std::string& why) {
  throw Error(ErrorCode::kInvalidFile, fmt::format("batch stream state: {}", why));
}

const nlohmann::json& field(const nlohmann::json& object, const char* name, nlohmann::json::value_t type,
                            const char* type_name) {
  const auto found = object.find(name);
  if (found == object.end()) refuse(fmt::format("no field \"{}\"", name));
  const bool ok = found->type() == type || (type == nlohmann::json::value_t::number_integer &&
                                            found->type() == nlohmann::json::value_t::number_unsigned);
  if (!ok) refuse(fmt::format("field \"{}\" is {}, not {}", name, found->type_name(), type_name));
  return *found;
}

std::uint64_t unsigned_field(const nlohmann::json& object, const char* name) {
  const nlohmann::json& value = field(object, name, nlohmann::json::value_t::number_unsigned, "a whole number >= 0");
  return value.get<std::uint64_t>();
}

std::int64_t count_field(const nlohmann::json& object, const char* name) {
  const nlohmann::json& value = field(object, name, nlohmann::json::value_t::number_integer, "a whole number");
  if (value.is_number_unsigned() && value.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX)) {
    refuse(fmt::format("field \"{}\" is {}, beyond 2^63 - 1", name, value.dump()));
  }
  const auto number = value.get<std::int64_t>();
  if (number < 0) refuse(fmt::format("field \"{}\" is {}, below 0", name, number));
  return number;
}

}  // namespace

std::string BatchStreamState::to_json() const {
  nlohmann::json sources_json = nlohmann::json::array();
  for (const Source& source : sources) {
    sources_json.push_back({{"tokens", source.tokens},
                            {"dtype", std::string(dtype_name(source.dtype))},
                            {"fingerprint", fmt::format("{:016x}", source.fingerprint)}});
  }
  const nlohmann::json state = {{"format", kFormat},  {"version", kVersion},          {"seed", seed},
                                {"step", step},       {"global_batch", global_batch}, {"context", context},
                                {"weights", weights}, {"sources", sources_json}};
  return state.dump();
}

BatchStreamState BatchStreamState::from_json(std::string_view json) {
  const nlohmann::json parsed = nlohmann::json::parse(json, nullptr, false);
  if (parsed.is_discarded()) refuse("not valid JSON");
  if (!parsed.is_object()) refuse(fmt::format("a JSON {}, not an object", parsed.type_name()));
  const std::string format = field(parsed, "format", nlohmann::json::value_t::string, "a string").get<std::string>();
  if (format != kFormat) refuse(fmt::format("format \"{}\", not \"{}\"", format, kFormat));
  const std::int64_t version = count_field(parsed, "version");
  if (version != kVersion) {
    refuse(fmt::format("format version {}; this backplane reads version {}", version, kVersion));
  }
  BatchStreamState state;
  state.seed = unsigned_field(parsed, "seed");
  state.step = count_field(parsed, "step");
  state.global_batch = count_field(parsed, "global_batch");
  state.context = count_field(parsed, "context");
  for (const nlohmann::json& weight : field(parsed, "weights", nlohmann::json::value_t::array, "an array")) {
    if (!weight.is_number() || !std::isfinite(weight.get<double>()) || weight.get<double>() < 0) {
      refuse(fmt::format("weight {} is not a finite number >= 0", weight.dump()));
    }
    state.weights.push_back(weight.get<double>());
  }
  for (const nlohmann::json& entry : field(parsed, "sources", nlohmann::json::value_t::array, "an array")) {
    if (!entry.is_object()) refuse(fmt::format("source {} is not an object", entry.dump()));
    Source source;
    source.tokens = unsigned_field(entry, "tokens");
    const std::string dtype = field(entry, "dtype", nlohmann::json::value_t::string, "a string").get<std::string>();
    const std::optional<DType> parsed_dtype = dtype_from_name(dtype);
    if (!parsed_dtype) refuse(fmt::format("source dtype \"{}\" is not a dtype", dtype));
    source.dtype = *parsed_dtype;
    const std::string fingerprint =
        field(entry, "fingerprint", nlohmann::json::value_t::string, "a string").get<std::string>();
    const bool hexadecimal =
        std::all_of(fingerprint.begin(), fingerprint.end(), [](unsigned char c) { return std::isxdigit(c) != 0; });
    if (fingerprint.size() != 16 || !hexadecimal) {
      refuse(fmt::format("source fingerprint \"{}\" is not 16 hexadecimal digits", fingerprint));
    }
    source.fingerprint = std::stoull(fingerprint, nullptr, 16);
    state.sources.push_back(source);
  }
  return state;
}

}  // namespace backplane
