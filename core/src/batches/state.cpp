// BatchStreamState as JSON: the format docs/batch-stream.md ("The state")
// describes, as one table of fields that writes the state, reads it and
// checks it on resume. Reading is strict and follows the growth rule: every
// field of the state's version present with its type, a field added by a
// later version given its default (which means "as before"), a field this
// reader does not know or a version newer than it refused, naming it. The
// JSON is read through state_json.hpp, which bounds nesting and quotes.
#include "batches/state_fields.hpp"
#include "batches/state_json.hpp"

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

using detail::count_field;
using detail::excerpt;
using detail::field;
using detail::Json;
using detail::listed;
using detail::refuse_state;
using detail::unsigned_field;

constexpr const char* kFormat = "backplane.batch_stream";
BatchStreamState::Source source_of(const Json& entry) {
  if (!entry.is_object()) refuse_state(fmt::format("source {} is not an object", excerpt(entry)));
  BatchStreamState::Source source;
  source.tokens = unsigned_field(entry, "tokens");
  const Json& dtype = field(entry, "dtype", Json::value_t::string, "a string");
  const std::optional<DType> parsed_dtype = dtype_from_name(dtype.get<std::string>());
  if (!parsed_dtype) refuse_state(fmt::format("source dtype {} is not a dtype", excerpt(dtype)));
  source.dtype = *parsed_dtype;
  const Json& fingerprint = field(entry, "fingerprint", Json::value_t::string, "a string");
  const std::string& digits = fingerprint.get_ref<const std::string&>();
  const bool hexadecimal =
      std::all_of(digits.begin(), digits.end(), [](unsigned char c) { return std::isxdigit(c) != 0; });
  if (digits.size() != 16 || !hexadecimal) {
    refuse_state(fmt::format("source fingerprint {} is not 16 hexadecimal digits", excerpt(fingerprint)));
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
  if (format != kFormat) refuse_state(fmt::format("format {}, not \"{}\"", excerpt(format), kFormat));
}

// The newest version, by value (see parse_state() on the members' symbols).
constexpr std::int64_t kNewestVersion = State::kVersion;

void write_version(const StateField& row, const State&, Json& object) { object[row.name] = kNewestVersion; }

// The version the rest of the state is read as.
std::int64_t read_version_number(const StateField& row, const Json& object) {
  const std::int64_t version = count_field(object, row.name);
  if (version > kNewestVersion) {
    refuse_state(
        fmt::format("format version {} is newer than this backplane reads (versions 1 to {}): resume it with the "
                    "backplane that saved it, or a later one",
                    version, kNewestVersion));
  }
  if (version < 1) refuse_state(fmt::format("format version {}; versions start at 1", version));
  return version;
}

void read_version(const StateField& row, const Json& object, State&) { (void)read_version_number(row, object); }

std::string step_in_range(const StateField&, const State& saved, const State&) {
  // Steps are counted in int64 with prefetch steps of look-ahead on top.
  if (saved.step >= 0 && saved.step <= kLastStep) return {};
  return fmt::format("cannot resume at step {} (the last step is 2^63 - {})", saved.step, INT64_MAX - kLastStep + 1);
}

// A JSON array of weights, each a finite number >= 0.
std::vector<double> weights_of(const Json& list) {
  std::vector<double> weights;
  for (const Json& weight : list) {
    if (!weight.is_number() || !std::isfinite(weight.get<double>()) || weight.get<double>() < 0) {
      refuse_state(fmt::format("weight {} is not a finite number >= 0", excerpt(weight)));
    }
    weights.push_back(weight.get<double>());
  }
  return weights;
}

void read_weights(const StateField& row, const Json& object, State& state) {
  state.weights = weights_of(field(object, row.name, Json::value_t::array, "an array"));
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
  if (found == object.end()) refuse_state(fmt::format("no field \"{}\"", row.name));
  if (found->is_null()) return;
  const auto bad = [&] {
    refuse_state(
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

// The entries of `entries` (each with a `step`) that start at or before
// `step`: what a resumed stream must have drawn the same way.
template <class Entry>
std::span<const Entry> started(const std::vector<Entry>& entries, std::int64_t step) {
  const auto end = std::find_if(entries.begin(), entries.end(), [&](const Entry& entry) { return entry.step > step; });
  return {entries.data(), static_cast<std::size_t>(end - entries.begin())};
}

// A list of entries as whole numbers, [[step, ...], ...], each of `width`.
const Json& entry_list(const StateField& row, const Json& object, std::size_t width) {
  const Json& list = field(object, row.name, Json::value_t::array, "an array");
  for (const Json& entry : list) {
    if (!entry.is_array() || entry.size() != width) {
      refuse_state(fmt::format("field \"{}\" holds {}, not an entry of {} values", row.name, excerpt(entry), width));
    }
  }
  return list;
}

// An entry's step, after the first entry's (at 0) and increasing.
std::int64_t entry_step(const StateField& row, const Json& value, std::int64_t after) {
  if (!value.is_number_integer() ||
      (value.is_number_unsigned() && value.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX))) {
    refuse_state(
        fmt::format("field \"{}\" has an entry at step {}, not a whole number below 2^63", row.name, excerpt(value)));
  }
  const auto step = value.get<std::int64_t>();
  if (step <= after) {
    refuse_state(fmt::format("field \"{}\" has an entry at step {}, not after step {}", row.name, step, after));
  }
  return step;
}

std::int64_t positive(const StateField& row, const Json& value, const char* what) {
  if (!value.is_number_integer() ||
      (value.is_number_unsigned() && value.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX)) ||
      value.get<std::int64_t>() < 1) {
    refuse_state(fmt::format("field \"{}\" has a {} of {}, not a whole number >= 1", row.name, what, excerpt(value)));
  }
  return value.get<std::int64_t>();
}

void write_schedule(const StateField& row, const State& state, Json& object) {
  Json& list = object[row.name] = Json::array();
  for (const State::Stage& stage : state.schedule) list.push_back({stage.step, stage.global_batch, stage.context});
}

void read_schedule(const StateField& row, const Json& object, State& state) {
  std::int64_t after = 0;
  for (const Json& entry : entry_list(row, object, 3)) {
    State::Stage stage;
    stage.step = after = entry_step(row, entry[0], after);
    stage.global_batch = positive(row, entry[1], "global batch");
    stage.context = positive(row, entry[2], "context");
    state.schedule.push_back(stage);
  }
}

// Entries that started by the saved step must be the same: later ones may
// differ, so a run can extend its plan. `shown` describes one entry.
template <class Entry, class Shown>
std::string entries_match(const char* what, const std::vector<Entry>& saved_entries,
                          const std::vector<Entry>& stream_entries, std::int64_t step, Shown&& shown) {
  const std::span<const Entry> was = started(saved_entries, step);
  const std::span<const Entry> now = started(stream_entries, step);
  for (std::size_t index = 0; index < std::max(was.size(), now.size()); ++index) {
    if (index < was.size() && index < now.size() && was[index] == now[index]) continue;
    return fmt::format("cannot resume at step {}: {} entry {} of the state is {}, this stream's is {}", step, what,
                       index + 1, index < was.size() ? fmt::format("({})", shown(was[index])) : "none",
                       index < now.size() ? fmt::format("({})", shown(now[index])) : "none");
  }
  return {};
}

std::string schedule_match(const StateField&, const State& saved, const State& stream) {
  return entries_match("schedule", saved.schedule, stream.schedule, saved.step, [](const State::Stage& stage) {
    return fmt::format("step {}: global batch {}, context {}", stage.step, stage.global_batch, stage.context);
  });
}

void write_weight_schedule(const StateField& row, const State& state, Json& object) {
  Json& list = object[row.name] = Json::array();
  for (const WeightsEntry& entry : state.weight_schedule) list.push_back({entry.step, entry.weights});
}

void read_weight_schedule(const StateField& row, const Json& object, State& state) {
  std::int64_t after = 0;
  for (const Json& entry : entry_list(row, object, 2)) {
    WeightsEntry read;
    read.step = after = entry_step(row, entry[0], after);
    if (!entry[1].is_array()) {
      refuse_state(fmt::format("field \"{}\" has weights {}, not an array", row.name, excerpt(entry[1])));
    }
    read.weights = weights_of(entry[1]);
    // Field "weights" (read before) holds the first entry: each later one
    // has as many weights, not all zero.
    if (state.weights.empty()) {
      refuse_state(fmt::format("field \"{}\" has an entry at step {}, but field \"weights\" is [] (unweighted)",
                               row.name, read.step));
    }
    const bool all_zero =
        std::all_of(read.weights.begin(), read.weights.end(), [](double weight) { return weight == 0; });
    if (read.weights.size() != state.weights.size() || all_zero) {
      refuse_state(
          fmt::format("field \"{}\" has weights {} at step {}, not {} weights that are not all zero, as "
                      "field \"weights\" has",
                      row.name, excerpt(entry[1]), read.step, state.weights.size()));
    }
    state.weight_schedule.push_back(std::move(read));
  }
}

std::string weight_schedule_match(const StateField&, const State& saved, const State& stream) {
  return entries_match(
      "weights", saved.weight_schedule, stream.weight_schedule, saved.step,
      [](const WeightsEntry& entry) { return fmt::format("step {}: {}", entry.step, listed(entry.weights)); });
}

constexpr const char* kMixtureNames[] = {"per_sample", "interleaved"};

void write_mixture(const StateField& row, const State& state, Json& object) {
  object[row.name] = kMixtureNames[static_cast<int>(state.mixture)];
}

void read_mixture(const StateField& row, const Json& object, State& state) {
  const Json& name = field(object, row.name, Json::value_t::string, "a string");
  if (name == kMixtureNames[0]) {
    state.mixture = State::Mixture::kPerSample;
  } else if (name == kMixtureNames[1]) {
    state.mixture = State::Mixture::kInterleaved;
  } else {
    refuse_state(fmt::format("field \"{}\" is {}, not \"per_sample\" or \"interleaved\"", row.name, excerpt(name)));
  }
}

// The fields, in the order they are read and checked; `format` and
// `version` come first, since the version says which rows a state has.
constexpr std::array<StateField, 12> kFields{{
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
    {"schedule", "schedule", 3, write_schedule, read_schedule, schedule_match},
    {"weight_schedule", "weight schedule", 3, write_weight_schedule, read_weight_schedule, weight_schedule_match},
    // A stream takes its state's mixture: nothing to match.
    {"mixture", "mixture", 3, write_mixture, read_mixture, nullptr},
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
    refuse_state(fmt::format("unknown field {} (a version {} state has {})", excerpt(Json(key)), version,
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
  const Json parsed = detail::parse_state(json);
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
