// The cuda backend through the core, over the libcuda.so.1 emulator
// (fake_driver/), on any machine: each case re-runs itself in child processes
// whose driver is the emulator with 1 or 2 devices, failure injection or a
// slow stream (see fake_driver/README.md). What a user sees is checked:
// arrays' data, and the messages of errors.
#include "cuda_plugin_fixture.hpp"
#include "support/errors.hpp"
#include "support/run_command.hpp"
#include "support/temp_dir.hpp"
#include "support/trace_file.hpp"

#include <backplane/array.hpp>
#include <backplane/backplane.hpp>
#include <backplane/conformance.hpp>
#include <backplane/safetensors.hpp>
#include <backplane/trace.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace backplane;
using backplane::testing::over_fake_driver_runs;
using testing::contains;
using testing::error_from;

namespace {

const std::vector<std::vector<std::string>> kOneAndTwoDevices = {{"BP_FAKE_CUDA_DEVICES=1"},
                                                                 {"BP_FAKE_CUDA_DEVICES=2"}};

// The build's plugins (cpu and cuda) and nothing from the environment.
Runtime::Options build_plugins() {
  Runtime::Options options;
  options.plugin_paths = {BP_TEST_PLUGIN_DIR};
  options.skip_default_paths = true;
  options.environment = std::map<std::string, std::string>{};
  return options;
}

const Device kCpu{"cpu", 0};

int emulated_devices() { return std::atoi(std::getenv("BP_FAKE_CUDA_DEVICES")); }

std::vector<std::uint8_t> random_bytes(std::size_t size, std::uint64_t seed) {
  std::mt19937_64 generator(seed);
  std::vector<std::uint8_t> bytes(size);
  for (auto& byte : bytes) byte = static_cast<std::uint8_t>(generator());
  return bytes;
}

Array host_array(Runtime& runtime, const std::vector<std::uint8_t>& bytes) {
  return Array::from_host(runtime, kCpu, DType::kU8, {static_cast<std::int64_t>(bytes.size())}, bytes.data(),
                          bytes.size());
}

}  // namespace

TEST_CASE("[cuda][emulator] the conformance kit runs every device check, and passes") {
  if (!over_fake_driver_runs("*conformance kit runs every device check*", kOneAndTwoDevices)) return;
  const conformance::Report report = conformance::run(backplane::testing::plugin_path());
  REQUIRE(report.loaded);
  CHECK(report.available);
  CHECK(report.device_count == emulated_devices());
  for (const conformance::CheckResult& check : report.checks) {
    CAPTURE(check.name);
    CAPTURE(check.detail);
    CHECK(check.outcome != conformance::Outcome::kFail);
    if (check.outcome != conformance::Outcome::kNotApplicable) continue;
    MESSAGE("n/a: " << check.name << ": " << check.detail);
    // Only what the plugin does not advertise, the widening kernel that
    // cannot run without a GPU, and cross-device checks on one device may be
    // n/a: never for want of a device.
    const bool not_advertised = contains(check.detail, "not advertised") || contains(check.detail, "host-addressable");
    const bool kernel = contains(check.detail,
                                 "UNSUPPORTED on cuda:0: convert_integers: the widening kernel cannot "
                                 "run on cuda:0");
    const bool one_device = emulated_devices() == 1 && check.detail == "the backend has one device";
    CHECK((not_advertised || kernel || one_device));
  }
  CHECK(report.count(conformance::Outcome::kPass) > 40);
}

TEST_CASE("[cuda][emulator] device_put in every direction keeps the data") {
  if (!over_fake_driver_runs("*device_put in every direction*",
                             {{"BP_FAKE_CUDA_DEVICES=1"},
                              {"BP_FAKE_CUDA_DEVICES=2"},
                              {"BP_FAKE_CUDA_DEVICES=2", "BP_FAKE_CUDA_PEER=0", "BP_FAKE_CUDA_OP_DELAY_US=2000"}})) {
    return;
  }
  Runtime runtime(build_plugins());
  const Device first{"cuda", 0};
  const Device last{"cuda", emulated_devices() - 1};
  // Small (one staged copy) and large (the pinned ring, several chunks, odd tail).
  for (const std::size_t size : {std::size_t{1000}, (std::size_t{20} << 20) + 3}) {
    CAPTURE(size);
    const auto bytes = random_bytes(size, size);
    const Array source = host_array(runtime, bytes);
    const Array on_first = device_put(runtime, source, first);
    CHECK(on_first.device().selector() == "cuda:0");
    CHECK(device_put(runtime, on_first, first).same_as(on_first));
    // No waits in between: every step waits for the one before.
    const Array on_last = device_put(runtime, on_first, last);
    const Array back_on_first = device_put(runtime, on_last, first);
    const Array home = device_put(runtime, back_on_first, kCpu);
    CHECK(home.to_vector<std::uint8_t>() == bytes);
    CHECK(on_last.to_vector<std::uint8_t>() == bytes);
    CHECK(device_put(runtime, on_first, Device{"cpu", 0}).to_vector<std::uint8_t>() == bytes);
  }
  for (int ordinal = 0; ordinal < emulated_devices(); ++ordinal) {
    CHECK(memory_stats(runtime, Device{"cuda", ordinal}).in_use == 0);
  }
}

TEST_CASE("[cuda][emulator] take_windows onto each cuda device widens on the host when the kernel cannot run") {
  if (!over_fake_driver_runs("*take_windows onto each cuda device*", kOneAndTwoDevices)) return;
  Runtime runtime(build_plugins());
  std::vector<std::uint16_t> tokens(100'000);
  std::mt19937_64 generator(7);
  for (auto& token : tokens) token = static_cast<std::uint16_t>(generator());
  tokens[500] = 65535;
  const Array on_host = Array::from_host(runtime, kCpu, DType::kU16, {static_cast<std::int64_t>(tokens.size())},
                                         tokens.data(), tokens.size() * 2);
  const std::int64_t length = 65;
  for (int ordinal = 0; ordinal < emulated_devices(); ++ordinal) {
    const Device device{"cuda", ordinal};
    for (int step = 0; step < 3; ++step) {  // the first batch finds out, later ones know
      CAPTURE(step);
      std::vector<std::int64_t> offsets{500, 0, static_cast<std::int64_t>(tokens.size()) - length};
      for (int extra = 0; extra < 13; ++extra) {
        offsets.push_back(static_cast<std::int64_t>(generator() % (tokens.size() - length)));
      }
      const Array wide = take_windows(runtime, on_host, offsets, length, device, DType::kI64);
      const Array narrow = take_windows(runtime, on_host, offsets, length, device);
      CHECK(wide.device().selector() == device.selector());
      const auto wide_values = wide.to_vector<std::int64_t>();
      const auto narrow_values = narrow.to_vector<std::uint16_t>();
      bool all_equal = true;
      for (std::size_t row = 0; row < offsets.size(); ++row) {
        for (std::int64_t column = 0; column < length; ++column) {
          const std::uint16_t expected = tokens[static_cast<std::size_t>(offsets[row] + column)];
          const std::size_t at = row * static_cast<std::size_t>(length) + static_cast<std::size_t>(column);
          all_equal = all_equal && wide_values[at] == expected && narrow_values[at] == expected;
        }
      }
      CHECK(all_equal);
      CHECK(wide_values[0] == 65535);
    }
  }
}

TEST_CASE("[cuda][emulator] several transfers in flight, awaited out of order") {
  if (!over_fake_driver_runs("*several transfers in flight*",
                             {{"BP_FAKE_CUDA_DEVICES=1", "BP_FAKE_CUDA_OP_DELAY_US=3000"},
                              {"BP_FAKE_CUDA_DEVICES=2", "BP_FAKE_CUDA_OP_DELAY_US=3000"}})) {
    return;
  }
  Runtime runtime(build_plugins());
  std::vector<std::vector<std::uint8_t>> sent;
  std::vector<Array> arrived;
  for (int index = 0; index < 12; ++index) {
    sent.push_back(random_bytes(static_cast<std::size_t>(4096 * (index + 1) + index), 100 + index));
    const Device device{"cuda", index % emulated_devices()};
    arrived.push_back(device_put(runtime, host_array(runtime, sent.back()), device));
  }
  std::size_t pending = 0;
  for (const Array& array : arrived) pending += array.is_ready() ? 0 : 1;
  MESSAGE(pending << " of " << arrived.size() << " transfers were still in flight after the last was issued");
  // Back to the host from the device, newest first, then every other one.
  std::vector<Array> returned(arrived.size());
  for (std::size_t index = arrived.size(); index-- > 0;) returned[index] = device_put(runtime, arrived[index], kCpu);
  for (std::size_t index : {5, 11, 0, 7, 3, 9, 1, 10, 2, 8, 4, 6}) {
    CAPTURE(index);
    returned[index].block_until_ready();
    CHECK(returned[index].to_vector<std::uint8_t>() == sent[index]);
  }
}

TEST_CASE("[cuda][emulator] out of device memory names the size and the free and total memory") {
  if (!over_fake_driver_runs("*out of device memory names the size*",
                             {{"BP_FAKE_CUDA_DEVICES=1", "BP_FAKE_CUDA_MEMORY=64M"}})) {
    return;
  }
  Runtime runtime(build_plugins());
  const Device device{"cuda", 0};
  const auto held = random_bytes(std::size_t{16} << 20, 1);
  const Array kept = device_put(runtime, host_array(runtime, held), device);
  kept.block_until_ready();
  const auto big = random_bytes(std::size_t{100} << 20, 2);
  const Error error = error_from([&] { device_put(runtime, host_array(runtime, big), device); });
  const std::string message = error.what();
  MESSAGE(message);
  CHECK(error.code() == ErrorCode::kOutOfMemory);
  CHECK(contains(message, "out of device memory on cuda:0: cannot allocate 100.0 MiB (104857600 bytes)"));
  CHECK(contains(message, "48.0 MiB (50331648 bytes) free of 64.0 MiB (67108864 bytes)"));
  CHECK(contains(message,
                 "cuMemAlloc of 100.00 MiB on cuda:0 failed: CUDA_ERROR_OUT_OF_MEMORY: out of memory "
                 "(free 48.00 MiB of 64.00 MiB)"));
  // Nothing leaked: what fits still goes.
  const auto fits = random_bytes(std::size_t{40} << 20, 3);
  CHECK(device_put(runtime, host_array(runtime, fits), device).to_vector<std::uint8_t>() == fits);
  CHECK(kept.to_vector<std::uint8_t>() == held);
}

TEST_CASE("[cuda][emulator] memory_stats reports what cuMemGetInfo says once the device is in use") {
  if (!over_fake_driver_runs("*memory_stats reports what cuMemGetInfo says*",
                             {{"BP_FAKE_CUDA_DEVICES=1", "BP_FAKE_CUDA_MEMORY=64M"}})) {
    return;
  }
  Runtime runtime(build_plugins());
  const Device device{"cuda", 0};
  MemoryStats stats = memory_stats(runtime, device);
  CHECK(stats.memory_total == std::uint64_t{64} << 20);
  CHECK_FALSE(stats.memory_free.has_value());  // no context yet, and none is made just to ask

  {
    const Array phase = device_put(runtime, host_array(runtime, random_bytes(std::size_t{16} << 20, 1)), device);
    phase.block_until_ready();
    stats = memory_stats(runtime, device);
    CHECK(stats.memory_total == std::uint64_t{64} << 20);
    CHECK(stats.memory_free == std::uint64_t{48} << 20);  // the emulator's 64 MiB less the 16 MiB held
    CHECK(stats.peak == std::uint64_t{16} << 20);
  }
  reset_peak(runtime, device);
  stats = memory_stats(runtime, device);
  CHECK(stats.peak == 0);
  CHECK(stats.memory_free == std::uint64_t{48} << 20);  // the block is cached, still held from the driver
  empty_cache(runtime, device);
  CHECK(memory_stats(runtime, device).memory_free == std::uint64_t{64} << 20);
}

TEST_CASE("[cuda][emulator] a copy failing mid-transfer fails that transfer only, with the driver's error") {
  // The second chunk of the first large put is refused by the driver.
  if (!over_fake_driver_runs("*a copy failing mid-transfer*",
                             {{"BP_FAKE_CUDA_DEVICES=1", "BP_FAKE_CUDA_FAIL_FUNCTION=cuMemcpyAsync",
                               "BP_FAKE_CUDA_FAIL_CALL=2", "BP_FAKE_CUDA_FAIL_RESULT=999"}})) {
    return;
  }
  Runtime runtime(build_plugins());
  const Device device{"cuda", 0};
  const auto bytes = random_bytes((std::size_t{20} << 20) + 5, 4);
  {
    const Array failed = device_put(runtime, host_array(runtime, bytes), device);
    const Error error = error_from([&] { failed.block_until_ready(); });
    const std::string message = error.what();
    MESSAGE(message);
    CHECK(error.code() == ErrorCode::kDevice);
    CHECK(contains(message, "device_put of 20.0 MiB (20971525 bytes) from cpu:0 to cuda:0 failed"));
    CHECK(contains(message, "(cuMemcpyAsync) failed: CUDA_ERROR_UNKNOWN: unknown error"));
    // The same error on every wait, and for a transfer reading the array.
    CHECK(error_from([&] { failed.to_vector<std::uint8_t>(); }).what() == message);
    CHECK(contains(error_from([&] { device_put(runtime, failed, kCpu).block_until_ready(); }).what(),
                   "its source array is unusable"));
  }
  // The device is fine: the next transfer arrives intact.
  CHECK(device_put(runtime, host_array(runtime, bytes), device).to_vector<std::uint8_t>() == bytes);
  CHECK(memory_stats(runtime, device).in_use == 0);
}

TEST_CASE("[cuda][emulator] a sticky device error surfaces at the next wait, naming the device") {
  // Two copies run; the third faults (an illegal address, as a GPU reports
  // a crashed kernel) and every later call on cuda:0 returns that error.
  if (!over_fake_driver_runs("*a sticky device error surfaces*",
                             {{"BP_FAKE_CUDA_DEVICES=2", "BP_FAKE_CUDA_STICKY_AFTER=2"}})) {
    return;
  }
  Runtime runtime(build_plugins());
  const Device device{"cuda", 0};
  const auto bytes = random_bytes(4096, 5);
  const Array first = device_put(runtime, host_array(runtime, bytes), device);
  CHECK(device_put(runtime, first, kCpu).to_vector<std::uint8_t>() == bytes);  // copies 1 and 2
  const Array faulted = device_put(runtime, host_array(runtime, bytes), device);
  const Error error = error_from([&] { faulted.block_until_ready(); });
  const std::string message = error.what();
  MESSAGE(message);
  CHECK(error.code() == ErrorCode::kDevice);
  CHECK(contains(message, "to cuda:0 failed"));
  CHECK(contains(message, "CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered"));
  // Sticky: later work on cuda:0 fails with the same driver error.
  const Error later = error_from([&] { device_put(runtime, host_array(runtime, bytes), device).block_until_ready(); });
  MESSAGE(std::string(later.what()));
  CHECK(contains(later.what(), "cuda:0"));
  CHECK(contains(later.what(), "CUDA_ERROR_ILLEGAL_ADDRESS"));
}

TEST_CASE("[cuda][emulator] safetensors streams a file onto cuda:0") {
  if (!over_fake_driver_runs(
          "*safetensors streams a file onto cuda:0*",
          {{"BP_FAKE_CUDA_DEVICES=1"}, {"BP_FAKE_CUDA_DEVICES=1", "BP_FAKE_CUDA_OP_DELAY_US=1000"}})) {
    return;
  }
  Runtime runtime(build_plugins());
  namespace st = safetensors;
  const auto big = random_bytes((std::size_t{19} << 20) + 6, 6);  // several staging chunks
  const auto small = random_bytes(10, 7);
  const std::vector<st::HostTensor> tensors{
      {{"big", "U16", {big.size() / 2}}, std::as_bytes(std::span(big))},
      {{"small", "U8", {2, 5}}, std::as_bytes(std::span(small))},
      {{"empty", "F32", {0, 3}}, {}},
  };
  const auto path =
      std::filesystem::temp_directory_path() / ("backplane-cuda-emulator-" + std::to_string(getpid()) + ".safetensors");
  st::save(path, tensors);
  std::vector<std::pair<std::uint64_t, std::uint64_t>> progress;
  st::LoadOptions options;
  options.progress = [&](std::uint64_t done, std::uint64_t total) { progress.emplace_back(done, total); };
  st::Loaded loaded = st::load(runtime, path, Device{"cuda", 0}, options);
  std::filesystem::remove(path);
  REQUIRE(loaded.tensors.size() == 3);
  const Array& on_device = loaded.tensors.at("big");
  CHECK(on_device.device().selector() == "cuda:0");
  CHECK(on_device.is_ready());
  std::vector<std::uint8_t> back(big.size());
  on_device.copy_to_host(back.data(), back.size());
  CHECK(back == big);
  CHECK(loaded.tensors.at("small").to_vector<std::uint8_t>() == small);
  CHECK(loaded.tensors.at("empty").shape() == std::vector<std::int64_t>{0, 3});
  REQUIRE(progress.size() > 2);
  CHECK(progress.back().first == progress.back().second);
  CHECK(std::is_sorted(progress.begin(), progress.end()));
}

TEST_CASE("[cuda][emulator] the token-batch example runs onto cuda:0 and says where it widens") {
  if (!over_fake_driver_runs("*token-batch example runs onto cuda:0*", {{"BP_FAKE_CUDA_DEVICES=1"}})) return;
  const testing::CommandResult result = testing::run_command(
      std::string(BP_TEST_EXAMPLE) + " --device cuda:0 --generate-mib 1 --batch 4 --context 64 --steps 20 2>&1");
  const std::string& output = result.output;
  MESSAGE(output);
  CHECK(result.exit_status == 0);
  CHECK(contains(output, "batches go to cuda:0"));
  CHECK(contains(output, "20 batches of [4, 65] int64 onto cuda:0"));
  // Once, with the plugin's reason.
  const std::string said = "cuda:0: widening integers on the host from now on: ";
  CHECK(contains(output, said + "cuda:0: convert_integers of 260 elements: convert_integers: the widening kernel "
                                "cannot run on cuda:0 (cudaFuncGetAttributes: "));
  CHECK(output.find(said) == output.rfind(said));
}

TEST_CASE("[cuda][emulator] a trace of device_put carries the device's own times of each copy") {
  // A slow stream, so that each copy takes milliseconds the host sees.
  if (!over_fake_driver_runs("*carries the device's own times*",
                             {{"BP_FAKE_CUDA_DEVICES=1", "BP_FAKE_CUDA_OP_DELAY_US=3000"}})) {
    return;
  }
  backplane::testing::TempDir directory;
  const auto path = directory.path() / "out.json";
  const auto bytes = random_bytes(100000, 11);
  {
    Runtime runtime(build_plugins());
    const Array source = host_array(runtime, bytes);
    // Outside the trace: copies are issued untimed, and nothing breaks.
    CHECK(device_put(runtime, device_put(runtime, source, Device{"cuda", 0}), kCpu).to_vector<std::uint8_t>() == bytes);
    trace_start(path);
    for (int round = 0; round < 3; ++round) {
      const Array on_device = device_put(runtime, source, Device{"cuda", 0});
      // Ready first, so that the download is issued on this thread as one
      // asynchronous copy (one waiting for its source goes to a transfer
      // thread, which keeps host times).
      on_device.block_until_ready();
      CHECK(device_put(runtime, on_device, kCpu).to_vector<std::uint8_t>() == bytes);
    }
    trace_stop();
  }
  const nlohmann::json file = backplane::testing::read_json(path);
  backplane::testing::check_no_overlap(file);
  // The device times come from a reference event whose host time is known to
  // within the round trip of a stream synchronisation (the emulator's worker
  // thread), plus cuEventElapsedTime's float rounding (under a microsecond):
  // 2 ms allows for a descheduled thread on a loaded machine, and is still
  // far below what a wrong clock or an unconverted elapsed time would give
  // (seconds to years).
  constexpr double kToleranceUs = 2000;
  CHECK(backplane::testing::check_device_times(file, "host_to_device", "cuda:0", kToleranceUs) == 3);
  CHECK(backplane::testing::check_device_times(file, "device_to_host", "cuda:0", kToleranceUs) == 3);
}
