// The batch stream at its limits: a hostile state (nested 100,000 deep, or
// holding huge values) is a short error that names the field; a stream
// resumed at the last step hands it out and then stops with an error, with no
// step count overflowing; a seed left unset follows the resumed state; a
// thread that cannot start is named.
#include "support/placement_fixture.hpp"

#include <backplane/batch_stream.hpp>

#include <fmt/format.h>

#include <pthread.h>

#include <string>
#include <vector>

using namespace backplane;
using namespace backplane::testing;

namespace {

std::vector<std::uint16_t> counting_tokens(std::size_t count) {
  std::vector<std::uint16_t> tokens(count);
  for (std::size_t index = 0; index < count; ++index) tokens[index] = static_cast<std::uint16_t>(index % 65521);
  return tokens;
}

// While alive, every thread the process starts asks for a stack larger than
// any address space, so pthread_create fails with EAGAIN as it does at a
// thread or memory limit (which root escapes, so a test cannot set one).
class ThreadsCannotStart {
 public:
  ThreadsCannotStart() {
    pthread_attr_t attr;
    REQUIRE(pthread_getattr_default_np(&saved_) == 0);
    REQUIRE(pthread_attr_init(&attr) == 0);
    REQUIRE(pthread_attr_setstacksize(&attr, std::size_t{1} << 50) == 0);
    REQUIRE(pthread_setattr_default_np(&attr) == 0);
    pthread_attr_destroy(&attr);
  }
  ~ThreadsCannotStart() {
    pthread_setattr_default_np(&saved_);
    pthread_attr_destroy(&saved_);
  }
  ThreadsCannotStart(const ThreadsCannotStart&) = delete;
  ThreadsCannotStart& operator=(const ThreadsCannotStart&) = delete;

 private:
  pthread_attr_t saved_{};
};

BatchStreamOptions small_options() {
  BatchStreamOptions options;
  options.batch_size = 4;
  options.context = 15;
  options.devices = {kCpu1};
  options.seed = 11;
  return options;
}

// A valid state's JSON with `field`'s value replaced by `value`.
std::string state_with(const std::string& field, const std::string& value) {
  BatchStreamState state;
  state.global_batch = 4;
  state.context = 15;
  state.sources = {{1000, DType::kU16, 1}};
  std::string json = state.to_json();
  const std::string key = "\"" + field + "\":";
  const std::size_t begin = json.find(key) + key.size();
  std::size_t end = begin;
  int depth = 0;
  for (; end < json.size(); ++end) {
    const char c = json[end];
    if (c == '[' || c == '{') ++depth;
    if (c == ']' || c == '}') --depth;
    if (depth < 0 || (depth == 0 && c == ',')) break;
    if (depth == 0 && (c == ']' || c == '}')) {
      ++end;
      break;
    }
  }
  return json.replace(begin, end - begin, value);
}

Error state_error(const std::string& json) {
  const Error error = error_from([&] { (void)BatchStreamState::from_json(json); });
  CHECK(error.code() == ErrorCode::kInvalidFile);
  return error;
}

std::string nested(std::size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }

}  // namespace

TEST_CASE("[batches] a state nested 100,000 deep is refused with a short message naming the field") {
  for (const char* field : {"weights", "sources"}) {
    CAPTURE(field);
    for (const std::size_t depth : {std::size_t{100'000}, std::size_t{50'000}, std::size_t{16}}) {
      CAPTURE(depth);
      const std::string message = state_error(state_with(field, nested(depth))).what();
      CHECK(message == fmt::format("batch stream state: field \"{}\" nests deeper than 16 levels", field));
    }
  }
  // A whole state that is an array nested deep has no field to name.
  CHECK(std::string(state_error(nested(100'000)).what()) ==
        "batch stream state: the state nests deeper than 16 levels");
}

TEST_CASE("[batches] a state just within the nesting limit is read, and its bad value quoted in a few characters") {
  // The object is level 1, so the weights may nest 15 arrays.
  CHECK(std::string(state_error(state_with("weights", nested(15))).what()) ==
        "batch stream state: weight " + nested(14) + " is not a finite number >= 0");
}

TEST_CASE("[batches] a state's huge bad values are quoted by a short prefix") {
  const std::string huge(100'000, 'x');
  const std::string cut = std::string(36, 'x') + "...";
  CHECK(std::string(state_error(state_with("format", "\"" + huge + "\"")).what()) ==
        "batch stream state: format \"" + cut + ", not \"backplane.batch_stream\"");
  std::string minus_ones;
  for (int index = 0; index < 50'000; ++index) minus_ones += "-1,";
  minus_ones.back() = ']';
  std::string prefix = "[";
  for (int index = 0; index < 12; ++index) prefix += "-1,";
  CHECK(std::string(state_error(state_with("weights", "[[" + minus_ones + "]")).what()) ==
        "batch stream state: weight " + prefix + "... is not a finite number >= 0");
  CHECK(std::string(state_error(state_with("sources", "[[" + minus_ones + "]")).what()) ==
        "batch stream state: source " + prefix + "... is not an object");
  const std::string source = R"([{"tokens": 1, "fingerprint": "0000000000000001", "dtype": ")" + huge + "\"}]";
  CHECK(std::string(state_error(state_with("sources", source)).what()) ==
        "batch stream state: source dtype \"" + cut + " is not a dtype");
}

TEST_CASE("[batches] a resume check lists at most 8 of a state's weights") {
  Runtime runtime(placement_options());
  const auto tokens = counting_tokens(1000);
  const Array source = Array::from_host(runtime, kCpu0, DType::kU16, {1000}, tokens.data(), tokens.size() * 2);
  BatchStreamOptions options = small_options();
  options.weights = {1.0};
  BatchStreamState state = BatchStream(runtime, {source}, options).state();
  state.weights.assign(1000, 0.5);
  const Error error = error_from([&] { BatchStream stream(runtime, {source}, options, &state); });
  CHECK(std::string(error.what()) ==
        "BatchStream: cannot resume: the state was saved with weights [0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, ...] "
        "(1000 weights), this stream has [1]");
}

TEST_CASE("[batches] a stream resumed at the last step hands it out, then stops; no step count overflows") {
  Runtime runtime(placement_options());
  const auto tokens = counting_tokens(1000);
  const Array source = Array::from_host(runtime, kCpu0, DType::kU16, {1000}, tokens.data(), tokens.size() * 2);
  BatchStreamOptions options = small_options();
  options.prefetch = kMaxPrefetch;  // the most steps ahead of the last one
  BatchStreamState state = BatchStream(runtime, {source}, options).state();
  CHECK(kLastStep == INT64_MAX - 128);
  state.step = kLastStep;
  BatchStream last(runtime, {source}, options, &state);
  CHECK(last.step() == kLastStep);
  const std::vector<Window> windows = last.windows(kLastStep);
  const std::vector<std::uint16_t> values = last.next()[0].to_vector<std::uint16_t>();
  for (std::size_t row = 0; row < windows.size(); ++row) {
    CHECK(values[row * 16] == tokens[static_cast<std::size_t>(windows[row].start)]);
  }
  CHECK(last.step() == kLastStep + 1);
  for (int attempt = 0; attempt < 2; ++attempt) {  // and it stays so
    const Error error = error_from([&] { (void)last.next(); });
    CHECK(error.code() == ErrorCode::kOutOfRange);
    CHECK(std::string(error.what()) ==
          "BatchStream: step 9223372036854775679 was the last a stream hands out (2^63 - 129)");
  }
  CHECK(last.state().step == kLastStep + 1);
  state.step = kLastStep + 1;
  const Error past = error_from([&] { BatchStream stream(runtime, {source}, options, &state); });
  CHECK(std::string(past.what()) ==
        "BatchStream: cannot resume at step 9223372036854775680 (the last step is 2^63 - 129)");
}

TEST_CASE("[batches] a seed left unset is the resumed state's, else 0") {
  Runtime runtime(placement_options());
  const auto tokens = counting_tokens(1000);
  const Array source = Array::from_host(runtime, kCpu0, DType::kU16, {1000}, tokens.data(), tokens.size() * 2);
  const auto same_windows = [](const BatchStream& a, const BatchStream& b, std::int64_t step) {
    const std::vector<Window> first = a.windows(step);
    const std::vector<Window> second = b.windows(step);
    REQUIRE(first.size() == second.size());
    for (std::size_t index = 0; index < first.size(); ++index) {
      if (first[index].source != second[index].source || first[index].start != second[index].start) return false;
    }
    return true;
  };
  BatchStreamOptions unset = small_options();
  unset.seed.reset();
  BatchStreamOptions zero = small_options();
  zero.seed = 0;
  const BatchStream fresh(runtime, {source}, unset);
  const BatchStream seeded(runtime, {source}, zero);
  CHECK(fresh.state().seed == 0);
  CHECK(same_windows(fresh, seeded, 5));

  BatchStream original(runtime, {source}, small_options());
  for (int step = 0; step < 3; ++step) (void)original.next();
  const BatchStreamState state = original.state();
  const BatchStream resumed(runtime, {source}, unset, &state);
  CHECK(resumed.state().seed == 11);
  CHECK(resumed.step() == 3);
  for (std::int64_t step = 3; step < 7; ++step) CHECK(same_windows(resumed, original, step));
  CHECK(!same_windows(resumed, seeded, 3));
}

TEST_CASE("[batches] a world_size below 1 is refused naming it") {
  Runtime runtime(placement_options());
  const auto tokens = counting_tokens(1000);
  const Array source = Array::from_host(runtime, kCpu0, DType::kU16, {1000}, tokens.data(), tokens.size() * 2);
  BatchStreamOptions options = small_options();
  options.world_size = 0;
  const Error error = error_from([&] { BatchStream stream(runtime, {source}, options); });
  CHECK(std::string(error.what()) == "BatchStream: world_size must be at least 1, got 0");
}

TEST_CASE("[batches] a producer or gather thread that cannot start is named, never an internal error") {
  Runtime runtime(placement_options());
  const auto tokens = counting_tokens(1000);
  const Array source = Array::from_host(runtime, kCpu0, DType::kU16, {1000}, tokens.data(), tokens.size() * 2);
  BatchStreamOptions options = small_options();
  options.threads = 1;  // no gather thread: the producer is the first to start
  {
    const ThreadsCannotStart limit;
    const Error error = error_from([&] { BatchStream stream(runtime, {source}, options); });
    CHECK(error.code() == ErrorCode::kUnavailable);
    CHECK(std::string(error.what()) ==
          "BatchStream: cannot start the producer thread: Resource temporarily unavailable");
    options.threads = 2;
    const Error gather = error_from([&] { BatchStream stream(runtime, {source}, options); });
    CHECK(gather.code() == ErrorCode::kUnavailable);
    CHECK(std::string(gather.what()) ==
          "BatchStream: cannot start gather thread 1 of 2: Resource temporarily unavailable");
  }
  BatchStream stream(runtime, {source}, options);  // the limit gone, it starts
  CHECK(stream.next().size() == 1);
}
