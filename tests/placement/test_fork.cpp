// fork() after using backplane: what a DataLoader worker (fork on Linux) sees.
// Each case forks; the parent waits at most 30 s for the child (see
// support/fork_child.hpp). Names avoid the words that select cases for the
// ThreadSanitizer run: TSan does not support fork in a threaded process.
#include "support/fork_child.hpp"
#include "support/placement_fixture.hpp"

#include <backplane/safetensors.hpp>

#include <cstdlib>
#include <filesystem>
#include <numeric>

using namespace backplane;
using namespace backplane::testing;

namespace {

std::vector<std::uint16_t> token_values(std::size_t count) {
  std::vector<std::uint16_t> tokens(count);
  std::iota(tokens.begin(), tokens.end(), std::uint16_t{0});
  return tokens;
}

// device_put between two cpu devices (on the transfer threads above 1 MiB),
// take_windows onto cpu and a safetensors load, each checked against its data.
void check_host_work(Checks& checks, Runtime& runtime, const Device& to, const std::filesystem::path& file) {
  const auto bytes = random_bytes(24u << 20, 31);
  Array moved = device_put(runtime, u8_array(runtime, kCpu0, bytes), to);
  moved.block_until_ready();
  checks.expect(moved.to_vector<std::uint8_t>() == bytes, "device_put to " + to.selector() + " moved other bytes");

  const auto tokens = token_values(1000);
  Array token_array = Array::from_host(runtime, kCpu0, DType::kU16, {1000}, tokens.data(), tokens.size() * 2);
  const std::vector<std::int64_t> offsets{3, 500, 900};
  Array batch = take_windows(runtime, token_array, offsets, 65, to, DType::kI64);
  batch.block_until_ready();
  const auto values = batch.to_vector<std::int64_t>();
  checks.expect(batch.shape() == std::vector<std::int64_t>{3, 65}, "take_windows: wrong shape");
  checks.expect(values.size() == 195 && values[0] == 3 && values[65] == 500 && values[194] == 964,
                "take_windows gathered other tokens");

  auto loaded = safetensors::load(runtime, file, to);
  checks.expect(loaded.tensors.at("bytes").to_vector<std::uint8_t>() == random_bytes(4096, 3),
                "safetensors load read other bytes");
}

std::filesystem::path saved_file(Runtime& runtime, const char* name) {
  const auto path =
      std::filesystem::temp_directory_path() / (std::string(name) + std::to_string(getpid()) + ".safetensors");
  safetensors::save(path, {{"bytes", u8_array(runtime, kCpu0, random_bytes(4096, 3))}});
  return path;
}

}  // namespace

TEST_CASE("[fork] a child of a process that ran large transfers puts, samples and loads on cpu") {
  Runtime runtime(placement_options());
  const auto file = saved_file(runtime, "bp-fork-host");
  Checks parent;
  check_host_work(parent, runtime, kCpu1, file);  // starts the transfer threads
  REQUIRE_MESSAGE(parent.failures().empty(), parent.failures());

  CHECK_CHILD_PASSED(run_forked([&] {
    Checks checks;
    check_host_work(checks, runtime, kCpu1, file);  // the parent's runtime
    check_host_work(checks, runtime, kCpu2, file);
    Runtime fresh(placement_options());  // and a new one
    check_host_work(checks, fresh, kCpu1, file);
    return checks.failures();
  }));
  // The parent is unaffected.
  Checks after;
  check_host_work(after, runtime, kCpu1, file);
  CHECK_MESSAGE(after.failures().empty(), after.failures());
  std::filesystem::remove(file);
}

TEST_CASE("[fork] transfers still running at fork time fail in the child with a clear error, never hang") {
  Runtime runtime(placement_options({{"copy_delay_us", "200000"}}));
  const auto bytes = random_bytes(9u << 20, 12);
  Array source = u8_array(runtime, kCpu0, bytes);
  Array finished = device_put(runtime, source, kCpu1);
  finished.block_until_ready();
  // cpu -> sim -> cpu: the second put waits on a transfer thread for the
  // first, which takes the slow device at least 600 ms.
  Array on_sim = device_put(runtime, source, kSim0);
  Array back = device_put(runtime, on_sim, kCpu2);
  REQUIRE_FALSE(back.is_ready());

  CHECK_CHILD_PASSED(run_forked([&] {
    Checks checks;
    checks.expect(back.is_ready(), "is_ready() must not report a parent's transfer as still coming");
    try {
      back.block_until_ready();
      checks.expect(false, "block_until_ready succeeded on a transfer running in the parent");
    } catch (const Error& error) {
      checks.expect(error.code() == ErrorCode::kUnavailable, std::string("wrong code: ") + error.what());
      checks.expect(contains(error.what(),
                             "device_put of 9.0 MiB (9437184 bytes) from sim:0 to cpu:2 failed: "
                             "the transfer was in flight in the parent process when it forked"),
                    std::string("unclear error: ") + error.what());
    }
    // Work that had finished is there, and new work runs.
    checks.expect(finished.to_vector<std::uint8_t>() == bytes, "a finished transfer lost its data");
    Array again = device_put(runtime, finished, kCpu3);
    checks.expect(again.to_vector<std::uint8_t>() == bytes, "a new device_put in the child moved other bytes");
    return checks.failures();
  }));
  CHECK(back.to_vector<std::uint8_t>() == bytes);  // in the parent it completes
}

TEST_CASE("[fork] the process-default runtime works in a child") {
  setenv("BACKPLANE_PLUGIN_PATH", BP_TEST_PLUGIN_DIR, 1);
  Runtime& runtime = Runtime::process_default();
  const auto file = saved_file(runtime, "bp-fork-default");
  const auto tokens = token_values(4096);
  Array token_array = Array::from_host(runtime, kCpu0, DType::kU16, {4096}, tokens.data(), tokens.size() * 2);
  const std::vector<std::int64_t> offsets{0, 100};
  CHECK(take_windows(runtime, token_array, offsets, 8, kCpu0).to_vector<std::uint16_t>()[8] == 100);

  CHECK_CHILD_PASSED(run_forked([&] {
    Checks checks;
    Runtime& in_child = Runtime::process_default();
    checks.expect(&in_child == &runtime, "the child got another process-default runtime");
    Array batch = take_windows(in_child, token_array, offsets, 8, kCpu0, DType::kI64);
    checks.expect(batch.to_vector<std::int64_t>()[8] == 100, "take_windows gathered other tokens");
    auto loaded = safetensors::load(in_child, file);
    checks.expect(loaded.tensors.at("bytes").to_vector<std::uint8_t>() == random_bytes(4096, 3),
                  "safetensors load read other bytes");
    return checks.failures();
  }));
  std::filesystem::remove(file);
}

TEST_CASE("[fork] a device backend set up before fork() is refused in the child, naming it and the fix") {
  Runtime runtime(placement_options());
  const auto bytes = random_bytes(1u << 20, 9);
  Array on_sim = device_put(runtime, u8_array(runtime, kCpu0, bytes), kSim0);
  on_sim.block_until_ready();
  const std::string parent_pid = std::to_string(getpid());

  CHECK_CHILD_PASSED(run_forked([&] {
    Checks checks;
    const std::string expected = "sim:0 cannot be used in this process: the sim backend was set up in process " +
                                 parent_pid +
                                 " before fork(), and a backend whose memory is not host memory does not survive "
                                 "fork (its device state stays in the parent); use sim only in the parent, or start "
                                 "workers with the 'spawn' method";
    auto refused = [&](const char* what, auto&& call) {
      try {
        call();
        checks.expect(false, std::string(what) + " succeeded on sim in the child");
      } catch (const Error& error) {
        checks.expect(error.code() == ErrorCode::kUnavailable, std::string(what) + ": wrong code: " + error.what());
        checks.expect(contains(error.what(), expected), std::string(what) + ": unclear error: " + error.what());
      }
    };
    refused("device_put", [&] { device_put(runtime, u8_array(runtime, kCpu0, bytes), kSim0); });
    refused("reading a sim array", [&] { (void)on_sim.to_vector<std::uint8_t>(); });
    // cpu is still fine in the same runtime.
    checks.expect(device_put(runtime, u8_array(runtime, kCpu0, bytes), kCpu1).to_vector<std::uint8_t>() == bytes,
                  "cpu device_put failed next to the refused sim");
    // A runtime made in the child sets the backend up again.
    Runtime fresh(placement_options());
    checks.expect(device_put(fresh, u8_array(fresh, kCpu0, bytes), kSim0).to_vector<std::uint8_t>() == bytes,
                  "sim in a runtime made in the child failed");
    return checks.failures();
  }));
  CHECK(device_put(runtime, u8_array(runtime, kCpu0, bytes), kSim0).to_vector<std::uint8_t>() == bytes);
}
