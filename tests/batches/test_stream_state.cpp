// BatchStreamState's JSON: round trip, and every malformed state refused
// with a message naming the field.
#include "support/errors.hpp"

#include <backplane/batch_stream.hpp>

#include <doctest/doctest.h>

using namespace backplane;
using namespace backplane::testing;

namespace {

BatchStreamState sample_state() {
  BatchStreamState state;
  state.seed = 0xFFFFFFFFFFFFFFFF;
  state.step = 1'000'000;
  state.global_batch = 256;
  state.context = 1024;
  state.weights = {0.25, 0.75};
  state.sources = {{10'200'000'000, DType::kU16, 0x0123456789abcdef}, {5, DType::kU16, 1}};
  return state;
}

std::string error_for(const std::string& json) {
  const Error error = error_from([&] { (void)BatchStreamState::from_json(json); });
  CHECK(error.code() == ErrorCode::kInvalidFile);
  return error.what();
}

}  // namespace

TEST_CASE("[batches] a state survives JSON exactly, 64-bit seeds and counts included") {
  const BatchStreamState state = sample_state();
  const BatchStreamState back = BatchStreamState::from_json(state.to_json());
  CHECK(back.seed == state.seed);
  CHECK(back.step == state.step);
  CHECK(back.global_batch == state.global_batch);
  CHECK(back.context == state.context);
  CHECK(back.weights == state.weights);
  REQUIRE(back.sources.size() == 2);
  CHECK(back.sources[0].tokens == 10'200'000'000);
  CHECK(back.sources[0].dtype == DType::kU16);
  CHECK(back.sources[0].fingerprint == 0x0123456789abcdef);
  CHECK(contains(state.to_json(), "\"fingerprint\":\"0123456789abcdef\""));
}

// The growth rule: a field this reader does not know is refused, naming it
// (a newer writer that adds a field also raises the version, which is
// refused first); a field a later version added is refused in a state of an
// older version, and not required of it (the version-1 fixture,
// tests/batches/state_v1, resumes without "documents").
TEST_CASE("[batches] a state field this backplane does not know is refused, naming it") {
  std::string json = sample_state().to_json();
  json.insert(json.size() - 1, R"(,"curriculum":[[0,1]])");
  CHECK(error_for(json) ==
        "batch stream state: unknown field \"curriculum\" (a version 3 state has format, version, seed, step, "
        "global_batch, context, weights, sources, documents, schedule, weight_schedule, mixture)");
  // The same state as version 2 wrote it: without the fields version 3 added.
  std::string version_2 = sample_state().to_json();
  version_2.replace(version_2.find("\"version\":3"), 11, "\"version\":2");
  for (const std::string_view added : {",\"schedule\":[]", ",\"weight_schedule\":[]", ",\"mixture\":\"per_sample\""}) {
    version_2.erase(version_2.find(added), added.size());
  }
  CHECK(BatchStreamState::from_json(version_2).mixture == BatchStreamState::Mixture::kPerSample);
  std::string older = version_2;
  older.replace(older.find("\"version\":2"), 11, "\"version\":1");
  CHECK(error_for(older) ==
        "batch stream state: unknown field \"documents\" (a version 1 state has format, version, seed, step, "
        "global_batch, context, weights, sources)");
}

TEST_CASE("[batches] the schedule fields read back what was written, and bad entries are refused by field") {
  BatchStreamState state = sample_state();
  state.schedule = {{1000, 512, 1024}, {150'000, 512, 4096}};
  state.weight_schedule = {{180'000, {0.5, 0.5}}};
  state.mixture = BatchStreamState::Mixture::kInterleaved;
  const std::string json = state.to_json();
  CHECK(contains(json, R"("schedule":[[1000,512,1024],[150000,512,4096]])"));
  CHECK(contains(json, R"("weight_schedule":[[180000,[0.5,0.5]]])"));
  CHECK(contains(json, R"("mixture":"interleaved")"));
  const BatchStreamState back = BatchStreamState::from_json(json);
  CHECK(back.schedule == state.schedule);
  CHECK(back.weight_schedule == state.weight_schedule);
  CHECK(back.mixture == BatchStreamState::Mixture::kInterleaved);
  const auto replace = [&](std::string_view from, std::string_view to) {
    std::string copy = json;
    copy.replace(copy.find(from), from.size(), to);
    return copy;
  };
  CHECK(error_for(replace("[150000,512,4096]", "[1000,512,4096]")) ==
        "batch stream state: field \"schedule\" has an entry at step 1000, not after step 1000");
  CHECK(error_for(replace("[1000,512,1024]", "[0,512,1024]")) ==
        "batch stream state: field \"schedule\" has an entry at step 0, not after step 0");
  CHECK(error_for(replace("[1000,512,1024]", "[1000,0,1024]")) ==
        "batch stream state: field \"schedule\" has a global batch of 0, not a whole number >= 1");
  CHECK(error_for(replace("[1000,512,1024]", "[1000,512]")) ==
        "batch stream state: field \"schedule\" holds [1000,512], not an entry of 3 values");
  CHECK(error_for(replace("[[180000,[0.5,0.5]]]", "[[180000,0.5]]")) ==
        "batch stream state: field \"weight_schedule\" has weights 0.5, not an array");
  CHECK(error_for(replace("[0.5,0.5]]", "[0.5,-2.0]]")) ==
        "batch stream state: weight -2.0 is not a finite number >= 0");
  CHECK(error_for(replace("[1000,512,1024]", "[\"x\",512,1024]")) ==
        "batch stream state: field \"schedule\" has an entry at step \"x\", not a whole number below 2^63");
  CHECK(error_for(replace("[[180000,[0.5,0.5]]]", "[[180000,[0.5]]]")) ==
        "batch stream state: field \"weight_schedule\" has weights [0.5] at step 180000, not 2 weights that are not "
        "all zero, as field \"weights\" has");
  CHECK(error_for(replace("[0.5,0.5]]", "[0.0,0.0]]")) ==
        "batch stream state: field \"weight_schedule\" has weights [0.0,0.0] at step 180000, not 2 weights that are "
        "not all zero, as field \"weights\" has");
  CHECK(error_for(replace("\"weights\":[0.25,0.75]", "\"weights\":[]")) ==
        "batch stream state: field \"weight_schedule\" has an entry at step 180000, but field \"weights\" is [] "
        "(unweighted)");
  CHECK(error_for(replace("\"interleaved\"", "\"random\"")) ==
        "batch stream state: field \"mixture\" is \"random\", not \"per_sample\" or \"interleaved\"");
}

TEST_CASE("[batches] the documents field reads back what was written, and bad values are refused") {
  BatchStreamState state = sample_state();
  for (const auto kind :
       {DocumentBoundaries::Kind::kBos, DocumentBoundaries::Kind::kEos, DocumentBoundaries::Kind::kStarts}) {
    state.documents = {kind, kind == DocumentBoundaries::Kind::kStarts ? 0 : -7,
                       kind == DocumentBoundaries::Kind::kStarts ? 0xfedcba9876543210 : 0};
    CHECK(BatchStreamState::from_json(state.to_json()).documents == state.documents);
  }
  state.documents = {};
  CHECK(contains(state.to_json(), "\"documents\":null"));
  std::string json = state.to_json();
  for (const char* bad : {R"({"bos":"1"})", R"({"bos":1,"eos":2})", R"({"starts":"12"})", R"({"pad":1})", "[]", "7"}) {
    std::string copy = json;
    copy.replace(copy.find("\"documents\":null"), 16, std::string("\"documents\":") + bad);
    CHECK(contains(error_for(copy), "field \"documents\" is"));
  }
}

TEST_CASE("[batches] malformed states are refused, naming what is wrong") {
  CHECK(contains(error_for("{not json"), "not valid JSON"));
  CHECK(contains(error_for("[1, 2]"), "not an object"));
  CHECK(contains(error_for(R"({"format": "something.else", "version": 1})"), "format \"something.else\""));
  std::string json = sample_state().to_json();
  const auto replace = [&](std::string_view from, std::string_view to) {
    std::string copy = json;
    copy.replace(copy.find(from), from.size(), to);
    return copy;
  };
  CHECK(contains(error_for(replace("\"version\":3", "\"version\":4")),
                 "format version 4 is newer than this backplane reads (versions 1 to 3)"));
  CHECK(contains(error_for(replace("\"version\":3", "\"version\":0")), "format version 0; versions start at 1"));
  CHECK(contains(error_for(replace("\"step\":1000000", "\"step\":-3")), "\"step\" is -3, below 0"));
  CHECK(contains(error_for(replace("\"step\":1000000", "\"step\":\"7\"")), "\"step\" is string"));
  CHECK(contains(error_for(replace("\"step\":1000000,", "")), "no field \"step\""));
  CHECK(contains(error_for(replace("\"dtype\":\"U16\"", "\"dtype\":\"u16\"")), "dtype \"u16\" is not a dtype"));
  CHECK(contains(error_for(replace("0123456789abcdef", "0x23456789abcdef")), "not 16 hexadecimal digits"));
  CHECK(contains(error_for(replace("[0.25,0.75]", "[-1.0,0.75]")), "weight -1.0 is not a finite number"));
}
