// BatchStreamState as JSON: the format docs/batch-stream.md ("The state")
// describes, as one table of fields that writes the state, reads it and
// checks it on resume. Reading is strict and follows the growth rule: every
// field of the state's version present with its type, a field added by a
// later version given its default (which means "as before"), a field this
// reader does not know or a version newer than it refused, naming it. Nesting is bounded before a document is built,
// and messages quote at most a short prefix of a bad value, so a hostile state costs a short error, never a deep
// recursion or a huge message.
#include "batches/state_fields.hpp"

#include <backplane/batch_stream.hpp>
#include <backplane/error.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <span>

namespace backplane {
namespace {

using Json = nlohmann::json;

constexpr const char* kFormat = "backplane.batch_stream";
constexpr std::size_t kQuotedCharacters = 40;  // of a bad value, in a message
constexpr std::size_t kListedWeights = 8;      // of a weights list, in a message

[[noreturn]] void refuse(const std::string& why) {
  throw Error(ErrorCode::kInvalidFile, fmt::format("batch stream state: {}", why));
}

// `text` cut to kQuotedCharacters, marked when cut.
std::string shortened(std::string text) {
  if (text.size() <= kQuotedCharacters) return text;
  text.resize(kQuotedCharacters - 3);
  return text + "...";
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

Json parse(std::string_view json) {
  DepthCheck check;
  (void)Json::sax_parse(json, &check);
  if (check.too_deep) {
    const std::string where = check.field.empty() ? "the state" : fmt::format("field {}", excerpt(check.field));
    // By value: binding the member to fmt's reference parameter would emit it
    // as an exported STB_GNU_UNIQUE symbol in unoptimised builds.
    constexpr int kDepth = BatchStreamState::kMaxJsonDepth;
    refuse(fmt::format("{} nests deeper than {} levels", where, kDepth));
  }
  if (check.malformed) refuse("not valid JSON");
  Json parsed = Json::parse(json, nullptr, false);
  if (parsed.is_discarded()) refuse("not valid JSON");
  if (!parsed.is_object()) refuse(fmt::format("a JSON {}, not an object", parsed.type_name()));
  return parsed;
}

const Json& field(const Json& object, const char* name, Json::value_t type, const char* type_name) {
  const auto found = object.find(name);
  if (found == object.end()) refuse(fmt::format("no field \"{}\"", name));
  const bool ok = found->type() == type ||
                  (type == Json::value_t::number_integer && found->type() == Json::value_t::number_unsigned);
  if (!ok) refuse(fmt::format("field \"{}\" is {}, not {}", name, found->type_name(), type_name));
  return *found;
}

std::uint64_t unsigned_field(const Json& object, const char* name) {
  return field(object, name, Json::value_t::number_unsigned, "a whole number >= 0").get<std::uint64_t>();
}

std::int64_t count_field(const Json& object, const char* name) {
  const Json& value = field(object, name, Json::value_t::number_integer, "a whole number");
  if (value.is_number_unsigned() && value.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX)) {
    refuse(fmt::format("field \"{}\" is {}, beyond 2^63 - 1", name, excerpt(value)));
  }
  const auto number = value.get<std::int64_t>();
  if (number < 0) refuse(fmt::format("field \"{}\" is {}, below 0", name, number));
  return number;
}

BatchStreamState::Source source_of(const Json& entry) {
  if (!entry.is_object()) refuse(fmt::format("source {} is not an object", excerpt(entry)));
  BatchStreamState::Source source;
  source.tokens = unsigned_field(entry, "tokens");
  const Json& dtype = field(entry, "dtype", Json::value_t::string, "a string");
  const std::optional<DType> parsed_dtype = dtype_from_name(dtype.get<std::string>());
  if (!parsed_dtype) refuse(fmt::format("source dtype {} is not a dtype", excerpt(dtype)));
  source.dtype = *parsed_dtype;
  const Json& fingerprint = field(entry, "fingerprint", Json::value_t::string, "a string");
  const std::string& digits = fingerprint.get_ref<const std::string&>();
  const bool hexadecimal =
      std::all_of(digits.begin(), digits.end(), [](unsigned char c) { return std::isxdigit(c) != 0; });
  if (digits.size() != 16 || !hexadecimal) {
    refuse(fmt::format("source fingerprint {} is not 16 hexadecimal digits", excerpt(fingerprint)));
  }
  source.fingerprint = std::stoull(digits, nullptr, 16);
  return source;
}

// One field of the state. `write` sets it in the JSON object, `read` takes it
// from a parsed one (refusing a missing or bad value), and `resume_problem`
// (absent for fields a stream does not check) says why a stream whose own
// state is `stream` cannot continue from a saved one: empty when it can.
// `described` names the field in a resume message.
struct StateField {
  const char* name;
  const char* described;
  // The format version that added the field: a state of an older version
  // lacks it, and its reader leaves the member's default, which must mean
  // what the older version did.
  std::int64_t since;
  void (*write)(const StateField& row, const BatchStreamState& state, Json& object);
  void (*read)(const StateField& row, const Json& object, BatchStreamState& state);
  std::string (*resume_problem)(const StateField& row, const BatchStreamState& saved, const BatchStreamState& stream);
};

using State = BatchStreamState;

template <auto Member>
void write_member(const StateField& row, const State& state, Json& object) {
  object[row.name] = state.*Member;
}

template <auto Member>
void read_unsigned(const StateField& row, const Json& object, State& state) {
  state.*Member = unsigned_field(object, row.name);
}

template <auto Member>
void read_count(const StateField& row, const Json& object, State& state) {
  state.*Member = count_field(object, row.name);
}

// "cannot resume: the state was saved with seed 11, this stream has 12".
template <auto Member>
std::string must_match(const StateField& row, const State& saved, const State& stream) {
  if (saved.*Member == stream.*Member) return {};
  return fmt::format("cannot resume: the state was saved with {} {}, this stream has {}", row.described, saved.*Member,
                     stream.*Member);
}

void write_format(const StateField& row, const State&, Json& object) { object[row.name] = kFormat; }

void read_format(const StateField& row, const Json& object, State&) {
  const Json& format = field(object, row.name, Json::value_t::string, "a string");
  if (format != kFormat) refuse(fmt::format("format {}, not \"{}\"", excerpt(format), kFormat));
}

// The newest version, by value (see parse() on the members' symbols).
constexpr std::int64_t kNewestVersion = State::kVersion;

void write_version(const StateField& row, const State&, Json& object) { object[row.name] = kNewestVersion; }

// The version the rest of the state is read as.
std::int64_t read_version_number(const StateField& row, const Json& object) {
  const std::int64_t version = count_field(object, row.name);
  if (version > kNewestVersion) {
    refuse(
        fmt::format("format version {} is newer than this backplane reads (versions 1 to {}): resume it with the "
                    "backplane that saved it, or a later one",
                    version, kNewestVersion));
  }
  if (version < 1) refuse(fmt::format("format version {}; versions start at 1", version));
  return version;
}

void read_version(const StateField& row, const Json& object, State&) { (void)read_version_number(row, object); }

std::string step_in_range(const StateField&, const State& saved, const State&) {
  // Steps are counted in int64 with prefetch steps of look-ahead on top.
  if (saved.step >= 0 && saved.step <= kLastStep) return {};
  return fmt::format("cannot resume at step {} (the last step is 2^63 - {})", saved.step, INT64_MAX - kLastStep + 1);
}

void read_weights(const StateField& row, const Json& object, State& state) {
  for (const Json& weight : field(object, row.name, Json::value_t::array, "an array")) {
    if (!weight.is_number() || !std::isfinite(weight.get<double>()) || weight.get<double>() < 0) {
      refuse(fmt::format("weight {} is not a finite number >= 0", excerpt(weight)));
    }
    state.weights.push_back(weight.get<double>());
  }
}

std::string weights_match(const StateField& row, const State& saved, const State& stream) {
  if (saved.weights == stream.weights) return {};
  return fmt::format("cannot resume: the state was saved with {} {}, this stream has {}", row.described,
                     listed(saved.weights), listed(stream.weights));
}

void write_sources(const StateField& row, const State& state, Json& object) {
  Json& list = object[row.name] = Json::array();
  for (const State::Source& source : state.sources) {
    list.push_back({{"tokens", source.tokens},
                    {"dtype", std::string(dtype_name(source.dtype))},
                    {"fingerprint", fmt::format("{:016x}", source.fingerprint)}});
  }
}

void read_sources(const StateField& row, const Json& object, State& state) {
  for (const Json& entry : field(object, row.name, Json::value_t::array, "an array")) {
    state.sources.push_back(source_of(entry));
  }
}

std::string sources_match(const StateField&, const State& saved, const State& stream) {
  if (saved.sources.size() != stream.sources.size()) {
    return fmt::format("cannot resume: the state was saved with a number of sources of {}, this stream has {}",
                       saved.sources.size(), stream.sources.size());
  }
  for (std::size_t index = 0; index < saved.sources.size(); ++index) {
    const State::Source& was = saved.sources[index];
    const State::Source& now = stream.sources[index];
    if (was.tokens != now.tokens || was.dtype != now.dtype || was.fingerprint != now.fingerprint) {
      return fmt::format(
          "cannot resume: source {} differs from the one the state was saved with ({} {} tokens, fingerprint "
          "{:016x}; now {} {} tokens, fingerprint {:016x})",
          index, was.tokens, dtype_name(was.dtype), was.fingerprint, now.tokens, dtype_name(now.dtype),
          now.fingerprint);
    }
  }
  return {};
}

// Documents as the state writes them: null, {"bos": ID}, {"eos": ID} or
// {"starts": FINGERPRINT}.
Json documents_json(const State::Documents& documents) {
  switch (documents.kind) {
    case DocumentBoundaries::Kind::kNone: return nullptr;
    case DocumentBoundaries::Kind::kBos: return {{"bos", documents.token}};
    case DocumentBoundaries::Kind::kEos: return {{"eos", documents.token}};
    case DocumentBoundaries::Kind::kStarts: return {{"starts", fmt::format("{:016x}", documents.fingerprint)}};
  }
  return nullptr;
}

void write_documents(const StateField& row, const State& state, Json& object) {
  object[row.name] = documents_json(state.documents);
}

void read_documents(const StateField& row, const Json& object, State& state) {
  const auto found = object.find(row.name);
  if (found == object.end()) refuse(fmt::format("no field \"{}\"", row.name));
  if (found->is_null()) return;
  const auto bad = [&] {
    refuse(
        fmt::format("field \"{}\" is {}, not null, {{\"bos\": ID}}, {{\"eos\": ID}} or {{\"starts\": "
                    "FINGERPRINT}}",
                    row.name, excerpt(*found)));
  };
  if (!found->is_object() || found->size() != 1) bad();
  // The entry is kept by value: a structured binding of items().begin()
  // would name a key inside a temporary that ends with the statement.
  const auto entry = found->begin();
  const std::string& key = entry.key();
  const Json& value = entry.value();
  State::Documents& documents = state.documents;
  if ((key == "bos" || key == "eos") && value.is_number_integer()) {
    if (value.is_number_unsigned() && value.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX)) bad();
    documents.kind = key == "bos" ? DocumentBoundaries::Kind::kBos : DocumentBoundaries::Kind::kEos;
    documents.token = value.get<std::int64_t>();
    return;
  }
  if (key != "starts" || !value.is_string()) bad();
  const std::string& digits = value.get_ref<const std::string&>();
  const bool hexadecimal =
      std::all_of(digits.begin(), digits.end(), [](unsigned char c) { return std::isxdigit(c) != 0; });
  if (digits.size() != 16 || !hexadecimal) bad();
  documents.kind = DocumentBoundaries::Kind::kStarts;
  documents.fingerprint = std::stoull(digits, nullptr, 16);
}

std::string documents_match(const StateField& row, const State& saved, const State& stream) {
  if (saved.documents == stream.documents) return {};
  return fmt::format("cannot resume: the state was saved with {} {}, this stream has {}", row.described,
                     documents_json(saved.documents).dump(), documents_json(stream.documents).dump());
}

// The fields, in the order they are read and checked; `format` and
// `version` come first, since the version says which rows a state has.
constexpr std::array<StateField, 9> kFields{{
    {"format", "format", 1, write_format, read_format, nullptr},
    {"version", "version", 1, write_version, read_version, nullptr},
    {"seed", "seed", 1, write_member<&State::seed>, read_unsigned<&State::seed>, must_match<&State::seed>},
    {"step", "step", 1, write_member<&State::step>, read_count<&State::step>, step_in_range},
    {"global_batch", "global batch (batch_size x world_size)", 1, write_member<&State::global_batch>,
     read_count<&State::global_batch>, must_match<&State::global_batch>},
    {"context", "context", 1, write_member<&State::context>, read_count<&State::context>, must_match<&State::context>},
    {"weights", "weights", 1, write_member<&State::weights>, read_weights, weights_match},
    {"sources", "sources", 1, write_sources, read_sources, sources_match},
    {"documents", "documents", 2, write_documents, read_documents, documents_match},
}};

// A key no row of the state's version names: refused, naming it and the
// fields that version has.
void refuse_unknown_fields(const Json& object, std::int64_t version) {
  for (const auto& [key, value] : object.items()) {
    const bool known = std::any_of(kFields.begin(), kFields.end(), [&, &name = key](const StateField& row) {
      return row.since <= version && name == row.name;
    });
    if (known) continue;
    std::vector<std::string_view> names;
    for (const StateField& row : kFields) {
      if (row.since <= version) names.emplace_back(row.name);
    }
    refuse(fmt::format("unknown field {} (a version {} state has {})", excerpt(Json(key)), version,
                       fmt::join(names, ", ")));
  }
}

}  // namespace

std::string BatchStreamState::to_json() const {
  Json object = Json::object();
  for (const StateField& row : kFields) row.write(row, *this, object);
  return object.dump();
}

BatchStreamState BatchStreamState::from_json(std::string_view json) {
  const Json parsed = parse(json);
  BatchStreamState state;
  // The format and the version first: the version says which rows follow.
  kFields[0].read(kFields[0], parsed, state);
  const std::int64_t version = read_version_number(kFields[1], parsed);
  for (const StateField& row : kFields) {
    if (row.since <= version) row.read(row, parsed, state);
  }
  refuse_unknown_fields(parsed, version);
  return state;
}

namespace detail {

void check_resumable(const BatchStreamState& saved, const BatchStreamState& stream) {
  for (const StateField& row : kFields) {
    if (row.resume_problem == nullptr) continue;
    const std::string problem = row.resume_problem(row, saved, stream);
    if (!problem.empty()) throw Error(ErrorCode::kInvalidArgument, fmt::format("BatchStream: {}", problem));
  }
}

}  // namespace detail
}  // namespace backplane
