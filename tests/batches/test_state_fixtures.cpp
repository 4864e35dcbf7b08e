// The growth rule's fixtures: a state of each version saved by the
// backplane of the day that version was the newest (tests/batches/state_vN,
// and the script that wrote it), which every later backplane must resume to
// the windows that stream drew. A failure here is a broken checkpoint in a
// user's run.
#include "support/placement_fixture.hpp"

#include <backplane/array.hpp>
#include <backplane/batch_stream.hpp>

#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

using namespace backplane;
using namespace backplane::testing;

namespace {

const std::filesystem::path kFixtures = std::filesystem::path(BP_TEST_SOURCE_DIR) / "tests/batches";

std::string text_of(const std::filesystem::path& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

// write_fixture.py's tokens_0 and tokens_1.
std::vector<std::uint16_t> fixture_tokens(int source) {
  std::vector<std::uint16_t> tokens(source == 0 ? 20000 : 7000);
  for (std::size_t index = 0; index < tokens.size(); ++index) {
    tokens[index] = static_cast<std::uint16_t>(source == 0 ? index % 65521 : (index * 40503) % 65536);
  }
  return tokens;
}

// Resumes the fixture in `directory` and checks the windows and the first
// batch it recorded.
void resume_fixture(const std::filesystem::path& directory) {
  Runtime runtime(placement_options());
  const std::vector<std::uint16_t> first = fixture_tokens(0);
  const std::vector<std::uint16_t> second = fixture_tokens(1);
  const Device cpu{"cpu", 0};
  std::vector<Array> sources = {Array::from_host(runtime, cpu, DType::kU16, {20000}, first.data(), first.size() * 2),
                                Array::from_host(runtime, cpu, DType::kU16, {7000}, second.data(), second.size() * 2)};
  const nlohmann::json expected = nlohmann::json::parse(text_of(directory / "windows.json"));
  const nlohmann::json& given = expected["options"];
  BatchStreamOptions options;
  if (given.contains("schedule")) {
    for (const auto& entry : given["schedule"]) options.schedule.push_back({entry[0], entry[1], entry[2]});
  } else {
    options.batch_size = given["batch_size"];
    options.context = given["context"];
  }
  options.seed = given["seed"];
  if (given["weights"][0].is_array()) {  // a weight schedule: [step, weights] entries
    for (const auto& entry : given["weights"]) {
      options.weight_schedule.push_back({entry[0], entry[1].get<std::vector<double>>()});
    }
  } else {
    options.weights = given["weights"].get<std::vector<double>>();
  }
  options.devices = {cpu};
  if (expected.contains("documents")) {
    // Documents start at every multiple of documents.every[j] in source j.
    std::vector<std::vector<std::int64_t>> starts(2);
    for (std::size_t source = 0; source < 2; ++source) {
      const auto every = expected["documents"]["every"][source].get<std::int64_t>();
      const auto tokens = static_cast<std::int64_t>(source == 0 ? first.size() : second.size());
      for (std::int64_t start = 0; start < tokens; start += every) starts[source].push_back(start);
    }
    options.documents = DocumentBoundaries::given(std::move(starts));
  }
  const BatchStreamState saved = BatchStreamState::from_json(text_of(directory / "state.json"));
  BatchStream stream(runtime, sources, options, &saved);
  for (const auto& [step, windows] : expected["windows"].items()) {
    CAPTURE(step);
    std::vector<std::pair<std::int32_t, std::int64_t>> drawn;
    for (const Window& window : stream.windows(std::stoll(step))) drawn.emplace_back(window.source, window.start);
    CHECK(drawn == windows.get<std::vector<std::pair<std::int32_t, std::int64_t>>>());
  }
  // And the batch it hands out first is the saved step's windows, token for
  // token (every fixture's step has windows of 31 + 1 tokens).
  const std::vector<Array> batch = stream.next();
  REQUIRE(batch.size() == 1);
  const std::vector<std::uint16_t> values = batch[0].to_vector<std::uint16_t>();  // the sources' dtype
  const auto& saved_step = expected["windows"][std::to_string(saved.step)];
  REQUIRE(values.size() == saved_step.size() * 32);
  for (std::size_t row = 0; row < saved_step.size(); ++row) {
    const std::vector<std::uint16_t>& tokens = saved_step[row][0] == 0 ? first : second;
    const auto start = saved_step[row][1].get<std::size_t>();
    for (std::size_t column = 0; column < 32; ++column) {
      REQUIRE(values[row * 32 + column] == tokens[start + column]);
    }
  }
  CHECK(stream.state().step == saved.step + 1);
}

}  // namespace

TEST_CASE("[batches] a version-1 state saved by an earlier backplane resumes to the windows it drew") {
  resume_fixture(kFixtures / "state_v1");
}

TEST_CASE("[batches] a version-2 state with documents saved by an earlier backplane resumes to the windows it drew") {
  resume_fixture(kFixtures / "state_v2");
}

TEST_CASE("[batches] a version-3 state inside a schedule and a weight schedule resumes to the windows it drew") {
  resume_fixture(kFixtures / "state_v3");
}
