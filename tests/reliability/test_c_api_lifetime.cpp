// Handles of the C API destroyed while other threads are inside calls on them:
// each racing call either completes on an object kept alive for it, or fails
// cleanly with INVALID_ARGUMENT naming the destroyed handle's kind. Never a
// use after free (the address sanitizer and thread sanitizer builds run these
// cases). Bounded: a few hundred rounds of a few threads.
#include "support/temp_dir.hpp"

#include <backplane/backplane.h>

#include <doctest/doctest.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr int kRounds = 100;
constexpr int kThreads = 4;

bp_runtime* cpu_runtime() {
  const char* paths[] = {BP_TEST_PLUGIN_DIR};
  bp_runtime_options options{};
  options.struct_size = sizeof(options);
  options.plugin_paths = paths;
  options.plugin_path_count = 1;
  options.ignore_environment = 1;
  options.skip_default_paths = 1;
  bp_runtime* runtime = nullptr;
  REQUIRE(bp_runtime_create(&options, &runtime) == BP_OK);
  return runtime;
}

bp_array* u16_tokens(bp_runtime* runtime, std::size_t count) {
  std::vector<std::uint16_t> tokens(count);
  for (std::size_t i = 0; i < count; ++i) tokens[i] = static_cast<std::uint16_t>(i);
  const std::int64_t shape[] = {static_cast<std::int64_t>(count)};
  bp_device cpu{};
  std::strcpy(cpu.backend, "cpu");
  bp_array* array = nullptr;
  REQUIRE(bp_array_create(runtime, &cpu, BP_DTYPE_U16, shape, 1, tokens.data(), count * 2, &array) == BP_OK);
  return array;
}

// What the racing threads saw that they should not have; checked on the main
// thread (doctest's checks are not meant to be called from several threads).
class Failures {
 public:
  void add(std::string what) {
    std::lock_guard lock(mutex_);
    if (list_.size() < 10) list_.push_back(std::move(what));
  }
  void check() {
    std::lock_guard lock(mutex_);
    for (const auto& failure : list_) FAIL_CHECK(failure);
    list_.clear();
  }

 private:
  std::mutex mutex_;
  std::vector<std::string> list_;
};

// One round: kThreads threads call `use` in a loop until it reports the
// handle destroyed (returns false); `destroy` runs once every thread is
// running, so the destruction lands while calls are in flight. `use` returns
// true while the handle is still live and records anything else it sees in
// `failures`.
void race_round(const std::function<bool()>& use, const std::function<void()>& destroy, Failures& failures) {
  std::atomic<int> started{0};
  std::atomic<bool> destroyed{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      started.fetch_add(1);
      // Once destroy() has returned, the very next call must be refused.
      for (int calls_after_destroy = 0; calls_after_destroy < 2;) {
        const bool was_destroyed = destroyed.load();
        if (!use()) return;
        if (was_destroyed) ++calls_after_destroy;
      }
      failures.add("a call succeeded after the handle was destroyed");
    });
  }
  while (started.load() < kThreads) std::this_thread::yield();
  destroy();
  destroyed.store(true);
  for (auto& thread : threads) thread.join();
}

// OK, or the clean error for a destroyed handle of kind `what`; anything else
// is recorded. Returns whether the handle was still live.
bool live_or_destroyed(bp_status status, const char* function, const char* destroyed_text, Failures& failures) {
  if (status == BP_OK) return true;
  const std::string message = bp_last_error();
  if (status != BP_STATUS_INVALID_ARGUMENT || message.find(destroyed_text) == std::string::npos) {
    failures.add(std::string(function) + " returned " + bp_status_name(status) + ": " + message);
  }
  return false;
}

}  // namespace

TEST_CASE("[c-api lifetime] a runtime destroyed while other threads call it: each call completes or is refused") {
  Failures failures;
  for (int round = 0; round < kRounds; ++round) {
    bp_runtime* runtime = cpu_runtime();
    bp_array* tokens = u16_tokens(runtime, 256);
    const int64_t offsets[] = {0, 7, 100};
    race_round(
        [&] {
          bp_device device{};
          bp_device_source source{};
          if (!live_or_destroyed(bp_default_device(runtime, &device, &source), "bp_default_device",
                                 "bp_default_device: runtime is not a live handle (destroyed?)", failures)) {
            return false;
          }
          bp_array* windows = nullptr;
          if (!live_or_destroyed(bp_take_windows(runtime, tokens, offsets, 3, 16, nullptr, BP_DTYPE_I64, &windows),
                                 "bp_take_windows", "bp_take_windows: runtime is not a live handle (destroyed?)",
                                 failures)) {
            return false;
          }
          // The result outlives the runtime: reading it still works.
          std::vector<std::int64_t> all(48);
          if (bp_array_copy_to_host(windows, all.data(), all.size() * 8) != BP_OK || all[16] != 7 || all[47] != 115) {
            failures.add(std::string("the windows read back wrong: ") + bp_last_error());
          }
          bp_array_destroy(windows);
          size_t count = 0;
          return live_or_destroyed(bp_backend_count(runtime, &count), "bp_backend_count",
                                   "bp_backend_count: runtime is not a live handle (destroyed?)", failures);
        },
        [&] { bp_runtime_destroy(runtime); }, failures);
    bp_array_destroy(tokens);
    failures.check();
  }
}

TEST_CASE("[c-api lifetime] an array destroyed while other threads read it: each call completes or is refused") {
  Failures failures;
  bp_runtime* runtime = cpu_runtime();
  for (int round = 0; round < kRounds; ++round) {
    bp_array* tokens = u16_tokens(runtime, 4096);
    race_round(
        [&] {
          const char* kDestroyed = "array is not a live handle (destroyed?)";
          uint64_t nbytes = 0;
          if (!live_or_destroyed(bp_array_nbytes(tokens, &nbytes), "bp_array_nbytes", kDestroyed, failures)) {
            return false;
          }
          std::vector<std::uint16_t> copy(4096);
          if (!live_or_destroyed(bp_array_copy_to_host(tokens, copy.data(), copy.size() * 2), "bp_array_copy_to_host",
                                 kDestroyed, failures)) {
            return false;
          }
          if (copy[4095] != 4095) failures.add("bp_array_copy_to_host read back wrong data");
          bp_array* slice = nullptr;
          if (!live_or_destroyed(bp_array_slice(tokens, 10, 20, &slice), "bp_array_slice", kDestroyed, failures)) {
            return false;
          }
          bp_array_destroy(slice);
          const int64_t offsets[] = {1};
          bp_array* windows = nullptr;
          if (!live_or_destroyed(bp_take_windows(runtime, tokens, offsets, 1, 8, nullptr, 0, &windows),
                                 "bp_take_windows", kDestroyed, failures)) {
            return false;
          }
          bp_array_destroy(windows);
          return true;
        },
        [&] { bp_array_destroy(tokens); }, failures);
    failures.check();
  }
  bp_runtime_destroy(runtime);
}

TEST_CASE("[c-api lifetime] headers, tensor maps and device infos destroyed while other threads use them") {
  backplane::testing::TempDir dir;
  const std::string path = (dir.path() / "lifetime.safetensors").string();
  bp_runtime* runtime = cpu_runtime();
  {
    bp_array* tokens = u16_tokens(runtime, 64);
    const char* names[] = {"tokens"};
    const bp_array* arrays[] = {tokens};
    const char* keys[] = {"format"};
    const char* values[] = {"pt"};
    REQUIRE(bp_safetensors_save(path.c_str(), names, arrays, 1, keys, values, 1) == BP_OK);
    bp_array_destroy(tokens);
  }
  Failures failures;
  for (int round = 0; round < kRounds / 3; ++round) {
    bp_safetensors_header* header = nullptr;
    REQUIRE(bp_safetensors_inspect(path.c_str(), &header) == BP_OK);
    race_round(
        [&] {
          const char* kDestroyed = "header is NULL or destroyed";
          bp_safetensors_tensor_info info{};
          info.struct_size = sizeof(info);
          if (!live_or_destroyed(bp_safetensors_header_tensor(header, 0, &info), "bp_safetensors_header_tensor",
                                 kDestroyed, failures)) {
            return false;
          }
          int64_t count = 0;
          return live_or_destroyed(bp_safetensors_header_metadata_count(header, &count),
                                   "bp_safetensors_header_metadata_count", kDestroyed, failures);
        },
        [&] { bp_safetensors_header_destroy(header); }, failures);

    bp_tensor_map* map = nullptr;
    REQUIRE(bp_safetensors_load(runtime, path.c_str(), nullptr, nullptr, &map) == BP_OK);
    race_round(
        [&] {
          const char* kDestroyed = "map is NULL or destroyed";
          bp_array* tokens = nullptr;
          if (!live_or_destroyed(bp_tensor_map_get(map, "tokens", &tokens), "bp_tensor_map_get", kDestroyed,
                                 failures)) {
            return false;
          }
          std::vector<std::uint16_t> copy(64);
          if (bp_array_copy_to_host(tokens, copy.data(), 128) != BP_OK || copy[63] != 63) {
            failures.add("a tensor handed out by a map reads back wrong after the map's destruction");
          }
          bp_array_destroy(tokens);
          size_t count = 0;
          return live_or_destroyed(bp_tensor_map_count(map, &count), "bp_tensor_map_count", kDestroyed, failures);
        },
        [&] { bp_tensor_map_destroy(map); }, failures);

    bp_device cpu{};
    std::strcpy(cpu.backend, "cpu");
    bp_device_info* info = nullptr;
    REQUIRE(bp_device_info_create(runtime, &cpu, &info) == BP_OK);
    race_round(
        [&] {
          // The status-less accessors answer a neutral value for a destroyed info.
          (void)bp_device_info_memory_total(info);
          (void)bp_device_info_attribute_count(info);
          const char* key = nullptr;
          const char* value = nullptr;
          const bp_status status = bp_device_info_attribute(info, 0, &key, &value);
          if (status == BP_STATUS_OUT_OF_RANGE) return true;  // a device without attributes
          return live_or_destroyed(status, "bp_device_info_attribute", "info is NULL or destroyed", failures);
        },
        [&] { bp_device_info_destroy(info); }, failures);
    failures.check();
  }
  bp_runtime_destroy(runtime);
}

TEST_CASE("[c-api lifetime] a batch stream destroyed while other threads take its batches") {
  // Concurrent next() calls on one stream are serialised by the C API; the
  // destroy stops the stream's threads once the last call in flight returns.
  Failures failures;
  bp_runtime* runtime = cpu_runtime();
  bp_array* tokens = u16_tokens(runtime, 4096);
  for (int round = 0; round < kRounds / 4; ++round) {
    bp_batch_stream_options options{};
    options.struct_size = sizeof(options);
    options.batch_size = 4;
    options.context = 15;
    options.dtype = BP_DTYPE_I64;
    options.seed = static_cast<uint64_t>(round);
    bp_batch_stream* stream = nullptr;
    REQUIRE(bp_batch_stream_create(runtime, &tokens, 1, &options, &stream) == BP_OK);
    race_round(
        [&] {
          const char* kDestroyed = "stream is not a live handle (destroyed?)";
          bp_array* batch = nullptr;
          size_t count = 0;
          if (!live_or_destroyed(bp_batch_stream_next(stream, &batch, 1, &count), "bp_batch_stream_next", kDestroyed,
                                 failures)) {
            return false;
          }
          // A batch outlives its stream: reading it still works.
          std::vector<std::int64_t> rows(4 * 16);
          if (bp_array_copy_to_host(batch, rows.data(), rows.size() * 8) != BP_OK || rows[1] != rows[0] + 1) {
            failures.add(std::string("a batch read back wrong: ") + bp_last_error());
          }
          bp_array_destroy(batch);
          bp_batch_stream_stats stats{};
          stats.struct_size = sizeof(stats);
          return live_or_destroyed(bp_batch_stream_stats_get(stream, &stats), "bp_batch_stream_stats_get", kDestroyed,
                                   failures);
        },
        [&] { bp_batch_stream_destroy(stream); }, failures);
    failures.check();
  }
  bp_array_destroy(tokens);
  bp_runtime_destroy(runtime);
}

namespace {

struct LoadInFlight {
  bp_runtime* runtime = nullptr;
  bool destroyed_once = false;
  bp_status call_after_destroy = BP_OK;
  std::string message_after_destroy;
};

// Called on the loading thread while bp_safetensors_load is in flight: another
// thread destroys the runtime, then a new call on it must be refused while the
// load goes on; the runtime is freed when the load returns, on this thread.
void destroy_during_load(uint64_t, uint64_t, void* user_data) {
  auto& state = *static_cast<LoadInFlight*>(user_data);
  if (state.destroyed_once) return;
  state.destroyed_once = true;
  std::thread([&] { bp_runtime_destroy(state.runtime); }).join();
  size_t count = 0;
  state.call_after_destroy = bp_backend_count(state.runtime, &count);
  state.message_after_destroy = bp_last_error();
}

}  // namespace

TEST_CASE("[c-api lifetime] a runtime destroyed by another thread during a load in flight: the load completes") {
  backplane::testing::TempDir dir;
  const std::string path = (dir.path() / "in_flight.safetensors").string();
  LoadInFlight state;
  state.runtime = cpu_runtime();
  {
    bp_array* tokens = u16_tokens(state.runtime, 1000);
    const char* names[] = {"tokens"};
    const bp_array* arrays[] = {tokens};
    REQUIRE(bp_safetensors_save(path.c_str(), names, arrays, 1, nullptr, nullptr, -1) == BP_OK);
    bp_array_destroy(tokens);
  }
  bp_safetensors_load_options options{};
  options.struct_size = sizeof(options);
  options.progress = destroy_during_load;
  options.user_data = &state;
  bp_tensor_map* map = nullptr;
  REQUIRE(bp_safetensors_load(state.runtime, path.c_str(), nullptr, &options, &map) == BP_OK);
  CHECK(state.destroyed_once);
  CHECK(state.call_after_destroy == BP_STATUS_INVALID_ARGUMENT);
  CHECK(state.message_after_destroy == "bp_backend_count: runtime is not a live handle (destroyed?)");
  bp_array* tokens = nullptr;
  REQUIRE(bp_tensor_map_get(map, "tokens", &tokens) == BP_OK);
  std::vector<std::uint16_t> copy(1000);
  CHECK(bp_array_copy_to_host(tokens, copy.data(), 2000) == BP_OK);
  CHECK(copy[999] == 999);
  bp_array_destroy(tokens);
  bp_tensor_map_destroy(map);
  // Once the load has returned, the runtime is gone for good.
  size_t count = 0;
  CHECK(bp_backend_count(state.runtime, &count) == BP_STATUS_INVALID_ARGUMENT);
}
