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
// refused first); a field a later version added is not required of an older
// state (no row is newer than version 1 yet, so the table's own test is the
// version-1 fixture, tests/batches/state_v1).
TEST_CASE("[batches] a state field this backplane does not know is refused, naming it") {
  std::string json = sample_state().to_json();
  json.insert(json.size() - 1, R"(,"documents":{"bos":50256})");
  const std::string message = error_for(json);
  CHECK(message ==
        "batch stream state: unknown field \"documents\" (a version 1 state has format, version, seed, step, "
        "global_batch, context, weights, sources)");
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
  CHECK(contains(error_for(replace("\"version\":1", "\"version\":2")),
                 "format version 2 is newer than this backplane reads (versions 1 to 1)"));
  CHECK(contains(error_for(replace("\"version\":1", "\"version\":0")), "format version 0; versions start at 1"));
  CHECK(contains(error_for(replace("\"step\":1000000", "\"step\":-3")), "\"step\" is -3, below 0"));
  CHECK(contains(error_for(replace("\"step\":1000000", "\"step\":\"7\"")), "\"step\" is string"));
  CHECK(contains(error_for(replace("\"step\":1000000,", "")), "no field \"step\""));
  CHECK(contains(error_for(replace("\"dtype\":\"U16\"", "\"dtype\":\"u16\"")), "dtype \"u16\" is not a dtype"));
  CHECK(contains(error_for(replace("0123456789abcdef", "0x23456789abcdef")), "not 16 hexadecimal digits"));
  CHECK(contains(error_for(replace("[0.25,0.75]", "[-1.0,0.75]")), "weight -1.0 is not a finite number"));
}
