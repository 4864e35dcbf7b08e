// Schedules from C++: each step's batch has that step's batch size and
// context, stats count what was handed out, the state records both
// schedules, a stream resumes inside them (later entries may change, earlier
// ones may not), elastic resume keeps every entry's global batch, a version 2
// state with weights keeps its rule and refuses a schedule, and documents
// keep one cu_seqlens length across the schedule. The windows themselves are
// held to the specification by tests/python/test_batch_stream_reference.py.
#include "support/placement_fixture.hpp"

#include <backplane/batch_stream.hpp>

#include <set>
#include <utility>
#include <vector>

using namespace backplane;
using namespace backplane::testing;

namespace {

// token[i] = i % 65521 (a prime): a window's first token names its start.
std::vector<std::uint16_t> counting_tokens(std::size_t count) {
  std::vector<std::uint16_t> tokens(count);
  for (std::size_t index = 0; index < count; ++index) tokens[index] = static_cast<std::uint16_t>(index % 65521);
  return tokens;
}

Array host_tokens(Runtime& runtime, const std::vector<std::uint16_t>& tokens) {
  return Array::from_host(runtime, kCpu0, DType::kU16, {static_cast<std::int64_t>(tokens.size())}, tokens.data(),
                          tokens.size() * 2);
}

// 4 windows of 15 + 1 tokens, then 8 from step 3, then 8 of 31 + 1 from step 5.
BatchStreamOptions scheduled(std::int64_t world_size = 1, std::int64_t rank = 0) {
  BatchStreamOptions options;
  options.schedule = {{0, 4, 15}, {3, 8, 15}, {5, 8, 31}};
  for (ScheduleEntry& entry : options.schedule) entry.batch_size /= world_size;
  options.world_size = world_size;
  options.rank = rank;
  options.devices = {kCpu1};
  options.seed = 7;
  return options;
}

std::vector<std::pair<int, std::int64_t>> pairs(const std::vector<Window>& windows) {
  std::vector<std::pair<int, std::int64_t>> out;
  for (const Window& window : windows) out.emplace_back(window.source, window.start);
  return out;
}

}  // namespace

TEST_CASE("[batches] a scheduled stream hands out each step in its shape, the windows it reports") {
  Runtime runtime(placement_options());
  const auto tokens = counting_tokens(20000);
  BatchStream stream(runtime, {host_tokens(runtime, tokens)}, scheduled());
  std::uint64_t windows = 0;
  for (std::int64_t step = 0; step < 8; ++step) {
    CAPTURE(step);
    const std::int64_t batch = step < 3 ? 4 : 8;
    const std::int64_t context = step < 5 ? 15 : 31;
    const std::vector<Window> drawn = stream.windows(step);
    REQUIRE(drawn.size() == static_cast<std::size_t>(batch));
    const std::vector<Array> arrays = stream.next();
    CHECK(arrays[0].shape() == std::vector<std::int64_t>{batch, context + 1});
    const auto values = arrays[0].to_vector<std::uint16_t>();
    for (std::size_t row = 0; row < drawn.size(); ++row) {
      for (std::int64_t column = 0; column <= context; ++column) {
        const auto at = static_cast<std::size_t>(drawn[row].start + column);
        CHECK(values[row * static_cast<std::size_t>(context + 1) + static_cast<std::size_t>(column)] == tokens[at]);
      }
    }
    windows += static_cast<std::uint64_t>(batch);
  }
  const BatchStreamStats stats = stream.stats();
  CHECK(stats.steps == 8);
  CHECK(stats.windows == windows);  // 3 x 4 + 5 x 8
  CHECK(stats.bytes == (3 * 4 * 16 + 2 * 8 * 16 + 3 * 8 * 32) * 2);
}

TEST_CASE("[batches] the state records the schedules, and a stream resumes inside them") {
  Runtime runtime(placement_options());
  const Array source = host_tokens(runtime, counting_tokens(20000));
  BatchStreamOptions options = scheduled();
  options.weight_schedule = {{0, {1.0}}, {4, {1.0}}};
  const BatchStream original(runtime, {source}, options);
  BatchStreamState state = original.state();
  CHECK(state.global_batch == 4);
  CHECK(state.context == 15);
  CHECK(state.schedule == std::vector<BatchStreamState::Stage>{{3, 8, 15}, {5, 8, 31}});
  CHECK(state.weight_schedule == std::vector<WeightsEntry>{{4, {1.0}}});
  CHECK(state.mixture == BatchStreamState::Mixture::kInterleaved);
  for (const std::int64_t at : {0, 3, 4, 6, 1000}) {
    CAPTURE(at);
    state.step = at;
    const BatchStream resumed(runtime, {source}, options, &state);
    for (std::int64_t step = at; step < at + 4; ++step)
      CHECK(pairs(resumed.windows(step)) == pairs(original.windows(step)));
  }
  // Entries after the saved step may change (here one is added): the steps
  // before them agree.
  state.step = 4;
  BatchStreamOptions extended = options;
  extended.schedule.push_back({7, 16, 63});
  const BatchStream resumed(runtime, {source}, extended, &state);
  for (std::int64_t step = 4; step < 7; ++step) CHECK(pairs(resumed.windows(step)) == pairs(original.windows(step)));
  CHECK(resumed.windows(7).size() == 16);
  // Entries before it may not.
  BatchStreamOptions rewritten = options;
  rewritten.schedule[1] = {2, 8, 15};
  CHECK(std::string(error_from([&] { BatchStream stream(runtime, {source}, rewritten, &state); }).what()) ==
        "BatchStream: cannot resume at step 4: schedule entry 1 of the state is (step 3: global batch 8, context "
        "15), this stream's is (step 2: global batch 8, context 15)");
}

TEST_CASE("[batches] elastic resume inside a schedule: 2 ranks resumed as 1 take the same windows") {
  Runtime runtime(placement_options());
  const Array source = host_tokens(runtime, counting_tokens(20000));
  std::optional<BatchStreamState> saved;
  std::vector<std::set<std::pair<int, std::int64_t>>> two(6);
  for (std::int64_t rank = 0; rank < 2; ++rank) {
    BatchStream stream(runtime, {source}, scheduled(2, rank));
    for (int step = 0; step < 4; ++step) (void)stream.next();
    saved = stream.state();
    for (std::int64_t step = 4; step < 10; ++step) {
      for (const Window& window : stream.windows(step))
        two[static_cast<std::size_t>(step - 4)].insert({window.source, window.start});
    }
  }
  BatchStream one(runtime, {source}, scheduled(), &*saved);
  CHECK(one.step() == 4);
  for (std::int64_t step = 4; step < 10; ++step) {
    const auto windows = pairs(one.windows(step));
    CHECK(std::set<std::pair<int, std::int64_t>>(windows.begin(), windows.end()) ==
          two[static_cast<std::size_t>(step - 4)]);
  }
}

TEST_CASE("[batches] a version 2 state with weights keeps the per-sample rule, and refuses a schedule") {
  Runtime runtime(placement_options());
  const auto tokens = counting_tokens(20000);
  const Array first = host_tokens(runtime, tokens);
  const Array second = host_tokens(runtime, counting_tokens(9000));
  BatchStreamOptions options;
  options.batch_size = 4;
  options.context = 15;
  options.devices = {kCpu1};
  options.weights = {0.6, 0.4};
  BatchStreamState state = BatchStream(runtime, {first, second}, options).state();
  state.mixture = BatchStreamState::Mixture::kPerSample;  // what a version 2 state reads as
  state.step = 50;
  const BatchStream legacy(runtime, {first, second}, options, &state);
  CHECK(legacy.state().mixture == BatchStreamState::Mixture::kPerSample);
  const BatchStream dealt(runtime, {first, second}, options);
  CHECK(pairs(legacy.windows(50)) != pairs(dealt.windows(50)));
  options.weights.clear();
  options.weight_schedule = {{0, {0.6, 0.4}}, {100, {0.5, 0.5}}};
  CHECK(std::string(error_from([&] {
                      BatchStream stream(runtime, {first, second}, options, &state);
                    }).what()) ==
        "BatchStream: cannot resume: the state's weighted windows were drawn by the rule of states version 1 and 2 "
        "(each sample picks its source at random), which keeps no place per source to carry across a schedule or a "
        "weight schedule; resume it without them");
}

TEST_CASE("[batches] documents across a schedule: one cu_seqlens length, each step's rows and context") {
  Runtime runtime(placement_options());
  std::vector<std::uint16_t> tokens = counting_tokens(20000);
  for (std::size_t index = 0; index < tokens.size(); index += 37) tokens[index] = 0;  // a document every 37 tokens
  const Array source = host_tokens(runtime, tokens);
  BatchStreamOptions options = scheduled();
  options.documents = DocumentBoundaries::bos(0);
  BatchStream stream(runtime, {source}, options);
  for (std::int64_t step = 0; step < 7; ++step) {
    CAPTURE(step);
    const StreamBatch batch = stream.next_batch();
    const std::int64_t rows = step < 3 ? 4 : 8;
    const std::int64_t context = step < 5 ? 15 : 31;
    CHECK(batch.tokens[0].shape() == std::vector<std::int64_t>{rows, context + 1});
    REQUIRE(batch.documents.size() == 1);
    // max_documents defaults to the largest rows x context: 8 x 31.
    CHECK(batch.documents[0].cu_seqlens.shape() == std::vector<std::int64_t>{8 * 31 + 1});
    CHECK(batch.documents[0].position_ids.shape() == std::vector<std::int64_t>{rows, context});
    const auto offsets = batch.documents[0].cu_seqlens.to_vector<std::int32_t>();
    CHECK(offsets.back() == rows * context);
  }
}
