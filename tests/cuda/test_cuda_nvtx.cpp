// NVTX ranges over the libcuda.so.1 emulator: device_put, take_windows and a
// batch stream on cuda:0, in a child process whose NVTX tool is the counting
// injection library in nvtx_recorder/ (what Nsight Systems would load through
// NVTX_INJECTION64_PATH), and in one with no tool at all.
#include "cuda_plugin_fixture.hpp"
#include "trace/trace.hpp"

#include <backplane/array.hpp>
#include <backplane/backplane.hpp>
#include <backplane/batch_stream.hpp>
#include <backplane/trace.hpp>

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

using namespace backplane;
using backplane::testing::over_fake_driver;

namespace {

const Device kCpu{"cpu", 0};
const Device kCuda{"cuda", 0};

// The work whose ranges are checked, each result checked too: an NVTX tool
// must not change what arrives.
void put_take_and_stream() {
  Runtime::Options options;
  options.plugin_paths = {BP_TEST_PLUGIN_DIR};
  options.skip_default_paths = true;
  options.environment = std::map<std::string, std::string>{};
  Runtime runtime(options);

  // Past one staging chunk: the pipeline of staging fills and copies.
  std::vector<std::uint8_t> bytes((std::size_t{20} << 20) + 5);
  std::iota(bytes.begin(), bytes.end(), std::uint8_t{1});
  const Array source = Array::from_host(runtime, kCpu, DType::kU8, {static_cast<std::int64_t>(bytes.size())},
                                        bytes.data(), bytes.size());
  const Array on_device = device_put(runtime, source, kCuda);
  CHECK(device_put(runtime, on_device, kCpu).to_vector<std::uint8_t>() == bytes);

  std::vector<std::uint16_t> tokens(10'000);
  std::iota(tokens.begin(), tokens.end(), std::uint16_t{0});
  const Array token_array = Array::from_host(runtime, kCpu, DType::kU16, {static_cast<std::int64_t>(tokens.size())},
                                             tokens.data(), tokens.size() * 2);
  const std::vector<std::int64_t> offsets{0, 100, 9'000};
  const Array windows = take_windows(runtime, token_array, offsets, 9, kCuda);
  const auto values = windows.to_vector<std::uint16_t>();
  REQUIRE(values.size() == 27);
  CHECK(values[0] == 0);
  CHECK(values[9] == 100);
  CHECK(values[26] == 9'008);

  BatchStreamOptions stream_options;
  stream_options.batch_size = 4;
  stream_options.context = 16;
  stream_options.devices = {kCuda};
  BatchStream stream(runtime, {token_array}, stream_options);
  for (int step = 0; step < 3; ++step) {
    const std::vector<Array> batch = stream.next();
    REQUIRE(batch.size() == 1);
    CHECK(batch[0].device().selector() == "cuda:0");
    const auto rows = batch[0].to_vector<std::uint16_t>();
    REQUIRE(rows.size() == 4 * 17);
    // Each window is 17 consecutive tokens (the tokens are their offsets).
    bool consecutive = true;
    for (std::size_t row = 0; row < 4; ++row) {
      for (std::size_t column = 1; column < 17; ++column) {
        consecutive = consecutive && rows[row * 17 + column] == rows[row * 17] + column;
      }
    }
    CHECK(consecutive);
  }
}

// BP_NVTX_RECORD's lines "DOMAIN\tCALL\tNAME\tCOUNT" as {"DOMAIN CALL NAME": count}.
std::map<std::string, std::uint64_t> read_record(const std::filesystem::path& path) {
  std::ifstream file(path);
  REQUIRE_MESSAGE(file.good(), "the injection library wrote no record to " << path);
  std::map<std::string, std::uint64_t> counts;
  std::string line;
  while (std::getline(file, line)) {
    std::istringstream fields(line);
    std::string domain, call, name, count;
    std::getline(fields, domain, '\t');
    std::getline(fields, call, '\t');
    std::getline(fields, name, '\t');
    std::getline(fields, count, '\t');
    counts[domain + " " + call + " " + name] = std::stoull(count);
  }
  return counts;
}

std::uint64_t count_of(const std::map<std::string, std::uint64_t>& counts, const std::string& key) {
  const auto found = counts.find(key);
  return found == counts.end() ? 0 : found->second;
}

}  // namespace

TEST_CASE("[cuda][emulator] NVTX: an attached tool sees the spans as balanced ranges in the backplane domain") {
  const std::filesystem::path record =
      std::filesystem::temp_directory_path() / ("bp-nvtx-record-" + std::to_string(getpid()) + ".tsv");
  if (!over_fake_driver("*NVTX: an attached tool sees the spans*",
                        {"BP_FAKE_CUDA_DEVICES=1", "NVTX_INJECTION64_PATH=" BP_TEST_NVTX_RECORDER,
                         "BP_NVTX_RECORD=" + record.string(), "BACKPLANE_TRACE"})) {
    const auto counts = read_record(record);
    std::filesystem::remove(record);
    std::string listed;
    for (const auto& [key, count] : counts) listed += key + " = " + std::to_string(count) + "\n";
    CAPTURE(listed);
    CHECK(count_of(counts, "backplane create backplane") == 1);
    // Start/end ranges: transfers and what the batch stream times.
    for (const char* name : {"device_put", "take_windows", "batch", "copy", "step", "wait", "transfer", "gather"}) {
      CAPTURE(name);
      CHECK(count_of(counts, std::string("backplane start ") + name) >= 1);
      CHECK(count_of(counts, std::string("backplane start ") + name) ==
            count_of(counts, std::string("backplane end ") + name));
    }
    // Push/pop ranges: work done on one thread.
    for (const char* name : {"gather", "fill", "allocate"}) {
      CAPTURE(name);
      CHECK(count_of(counts, std::string("backplane push ") + name) >= 1);
      CHECK(count_of(counts, std::string("backplane push ") + name) ==
            count_of(counts, std::string("backplane pop ") + name));
    }
    for (const auto& [key, count] : counts) {
      CAPTURE(key);
      CHECK(key.rfind("backplane ", 0) == 0);             // no range outside the domain
      CHECK(key.find(" ?") == std::string::npos);         // no end or pop without its start
      CHECK(key.find("(no ascii") == std::string::npos);  // every range is named
    }
    return;
  }
  // No trace is recorded: the ranges do not depend on one.
  put_take_and_stream();
  CHECK(detail::trace::tools_attached());
  CHECK_FALSE(trace_active().has_value());
}

TEST_CASE("[cuda][emulator] NVTX: with no tool attached nothing changes, with or without a trace") {
  const std::filesystem::path trace_file =
      std::filesystem::temp_directory_path() / ("bp-nvtx-trace-" + std::to_string(getpid()) + ".json");
  if (!over_fake_driver("*NVTX: with no tool attached*",
                        {"BP_FAKE_CUDA_DEVICES=1", "NVTX_INJECTION64_PATH", "BP_NVTX_RECORD", "BACKPLANE_TRACE"})) {
    return;
  }
  put_take_and_stream();
  CHECK_FALSE(detail::trace::tools_attached());
  CHECK_FALSE(detail::trace::enabled());
  trace_start(trace_file);
  put_take_and_stream();
  REQUIRE(trace_stop() == trace_file);
  std::ifstream written(trace_file);
  const std::string text((std::istreambuf_iterator<char>(written)), std::istreambuf_iterator<char>());
  std::filesystem::remove(trace_file);
  CHECK(text.find("\"name\":\"device_put\"") != std::string::npos);
  CHECK(text.find("\"name\":\"take_windows\"") != std::string::npos);
  CHECK(text.find("\"name\":\"wait\"") != std::string::npos);
  CHECK_FALSE(detail::trace::enabled());
}
