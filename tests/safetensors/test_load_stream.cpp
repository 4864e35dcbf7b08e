// load() onto a device that is not host memory (the simulated accelerator):
// streamed through staging with progress; data, subsets, failures, no leaks.
#include "support/load_fixture.hpp"

#include <doctest/doctest.h>

#include <cstring>
#include <thread>

using namespace backplane;
using namespace backplane::testing;
namespace st = backplane::safetensors;

namespace {

constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;

// Tensors sized so that staging chunks (8 MiB) start and end inside tensors,
// pack several small ones, and skip zero-size ones.
struct StreamFile {
  std::vector<std::pair<std::string, std::vector<std::uint8_t>>> data;
  std::filesystem::path path;

  explicit StreamFile(const TempDir& dir) {
    const std::vector<std::pair<std::string, std::uint64_t>> sizes{{"a_big", 5 * kMiB + 3}, {"b_empty", 0},
                                                                   {"c_tiny", 3},           {"d_large", 12 * kMiB + 7},
                                                                   {"e_small", 4096},       {"f_last", 1 * kMiB}};
    std::vector<st::HostTensor> tensors;
    for (std::size_t index = 0; index < sizes.size(); ++index) {
      data.emplace_back(sizes[index].first, random_bytes(sizes[index].second, static_cast<std::uint32_t>(index + 1)));
    }
    for (const auto& [name, bytes] : data) {
      tensors.push_back({{name, "U8", {bytes.size()}}, std::as_bytes(std::span(bytes))});
    }
    path = write_bytes(dir, "stream.safetensors", st::serialize(tensors, st::Metadata{{"k", "v"}}));
  }
  std::uint64_t total() const {
    std::uint64_t sum = 0;
    for (const auto& entry : data) sum += entry.second.size();
    return sum;
  }
};

using Reports = std::vector<std::pair<std::uint64_t, std::uint64_t>>;

void check_progress(const Reports& reports, std::uint64_t total, std::size_t at_least) {
  REQUIRE(reports.size() >= at_least);
  std::uint64_t last = 0;
  for (const auto& [done, reported_total] : reports) {
    CHECK(reported_total == total);
    CHECK(done >= last);
    CHECK(done <= total);
    last = done;
  }
  CHECK(reports.back().first == total);
}

}  // namespace

TEST_CASE("[safetensors] load onto sim streams every tensor with monotone progress") {
  Runtime runtime(placement_options());
  TempDir dir;
  StreamFile file(dir);
  Reports reports;
  st::LoadOptions options;
  const auto caller = std::this_thread::get_id();
  bool same_thread = true;
  options.progress = [&](std::uint64_t done, std::uint64_t total) {
    same_thread = same_thread && std::this_thread::get_id() == caller;
    reports.emplace_back(done, total);
  };
  st::Loaded loaded = st::load(runtime, file.path, kSim0, options);
  CHECK(loaded.metadata == st::Metadata{{"k", "v"}});
  REQUIRE(loaded.tensors.size() == file.data.size());
  for (const auto& [name, bytes] : file.data) {
    const Array& array = loaded.tensors.at(name);
    CHECK(array.device() == kSim0);
    CHECK(array.host_data() == nullptr);
    CHECK(array.is_ready());  // load returns when the data has arrived
    CHECK(array.to_vector<std::uint8_t>() == bytes);
  }
  check_progress(reports, file.total(), 3);  // 18 MiB in 8 MiB chunks
  CHECK(same_thread);
  // Staging came from the pinned cache and went back to it.
  const MemoryStats stats = memory_stats(runtime, kSim0);
  CHECK(stats.pinned_backend_allocations >= 1);
  CHECK(stats.pinned_in_use == 0);
}

TEST_CASE("[safetensors] a streamed subset reads only the named tensors, across gaps") {
  Runtime runtime(placement_options());
  TempDir dir;
  StreamFile file(dir);
  Reports reports;
  st::LoadOptions options;
  options.names = {"f_last", "a_big", "c_tiny", "b_empty"};
  options.progress = [&](std::uint64_t done, std::uint64_t total) { reports.emplace_back(done, total); };
  st::Loaded loaded = st::load(runtime, file.path, kSim1, options);
  REQUIRE(loaded.tensors.size() == 4);
  std::uint64_t total = 0;
  for (const auto& [name, bytes] : file.data) {
    if (!loaded.tensors.contains(name)) continue;
    total += bytes.size();
    CHECK(loaded.tensors.at(name).device() == kSim1);
    CHECK(loaded.tensors.at(name).to_vector<std::uint8_t>() == bytes);
  }
  check_progress(reports, total, 1);
}

TEST_CASE("[safetensors] streamed loads of tiny, empty and unaligned tensors") {
  Runtime runtime(placement_options());
  TempDir dir;
  Reports reports;
  st::LoadOptions options;
  options.progress = [&](std::uint64_t done, std::uint64_t total) { reports.emplace_back(done, total); };
  const auto empty = write_bytes(dir, "empty.safetensors", st::serialize({}, st::Metadata{}));
  st::Loaded none = st::load(runtime, empty, kSim0, options);
  CHECK(none.tensors.empty());
  CHECK(none.metadata == st::Metadata{});
  REQUIRE(reports.size() == 1);
  CHECK(reports[0] == std::pair<std::uint64_t, std::uint64_t>{0, 0});

  const std::string data = std::string("\x07", 1) + std::string("\x01\x02\x03\x04\x05\x06", 6);
  const auto odd = write_bytes(
      dir, "odd.safetensors",
      st_file(
          R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"b":{"dtype":"U16","shape":[3],"data_offsets":[1,7]},"z":{"dtype":"F64","shape":[0],"data_offsets":[7,7]}})",
          data));
  st::Loaded loaded = st::load(runtime, odd, kSim0);
  CHECK(loaded.tensors.at("a").to_vector<std::uint8_t>() == std::vector<std::uint8_t>{7});
  CHECK(loaded.tensors.at("b").to_vector<std::uint16_t>() == std::vector<std::uint16_t>{0x0201, 0x0403, 0x0605});
  CHECK(loaded.tensors.at("z").nbytes() == 0);
}

TEST_CASE("[safetensors] a device copy failing mid-stream is thrown naming the file and tensor; nothing leaks") {
  Runtime runtime(placement_options({{"fail_copy_at", "2"}}));
  TempDir dir;
  StreamFile file(dir);
  auto error = error_from([&] { st::load(runtime, file.path, kSim0); });
  CHECK(error.code() == ErrorCode::kDevice);
  CHECK(contains(error.what(), file.path.string()));
  CHECK(contains(error.what(), "onto sim:0"));
  CHECK(contains(error.what(), "injected device fault"));
  const MemoryStats stats = memory_stats(runtime, kSim0);
  CHECK(stats.in_use == 0);
  CHECK(stats.pinned_in_use == 0);
  // The runtime stays usable.
  st::LoadOptions options;
  options.names = {"c_tiny"};
  CHECK(st::load(runtime, file.path, kSim0, options).tensors.at("c_tiny").to_vector<std::uint8_t>() ==
        file.data[2].second);
}

TEST_CASE("[safetensors] out of device memory is thrown before any data moves") {
  Runtime runtime(placement_options({{"memory_limit", std::to_string(8 * kMiB)}}));
  TempDir dir;
  StreamFile file(dir);
  bool reported = false;
  st::LoadOptions options;
  options.progress = [&](std::uint64_t, std::uint64_t) { reported = true; };
  auto error = error_from([&] { st::load(runtime, file.path, kSim0, options); });
  CHECK(error.code() == ErrorCode::kOutOfMemory);
  CHECK(contains(error.what(), "sim:0"));
  CHECK_FALSE(reported);
  CHECK(memory_stats(runtime, kSim0).in_use == 0);
}
