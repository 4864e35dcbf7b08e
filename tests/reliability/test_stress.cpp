// Concurrency stress: N threads for T seconds against two shared runtimes,
// mixing device_put, take_windows, scoped default-device overrides,
// safetensors loads and header reads, every result checked. Defaults are small (8
// threads x 2 s); BACKPLANE_STRESS_THREADS and BACKPLANE_STRESS_SECONDS make
// longer runs (scripts/test's TSan build runs it as is). No timing is
// asserted: the duration only bounds how much work is done.
#include "support/placement_fixture.hpp"
#include "support/temp_dir.hpp"

#include <backplane/array.hpp>
#include <backplane/safetensors.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

using namespace backplane;
using namespace backplane::testing;

namespace {

int from_environment(const char* name, int fallback, int low, int high) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return fallback;
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  if (*end != '\0' || value < low || value > high) return fallback;
  return static_cast<int>(value);
}

struct Shared {
  std::vector<std::uint8_t> bytes;
  std::vector<std::uint16_t> tokens;
  std::filesystem::path safetensors_file;
};

struct RuntimeUnderTest {
  explicit RuntimeUnderTest(Runtime::Options options) : runtime(std::move(options)) {}
  Runtime runtime;
  Array bytes_on_cpu;
  Array bytes_on_sim;
  Array tokens;
};

const Device kDevices[] = {kCpu0, kCpu1, {"cpu", 2}, {"cpu", 3}, kSim0, kSim1};

// One step of one thread; returns a description of what went wrong, if anything.
std::string step(RuntimeUnderTest& under_test, const Shared& shared, std::mt19937& engine) {
  Runtime& runtime = under_test.runtime;
  const Device& target = kDevices[std::uniform_int_distribution<std::size_t>(0, std::size(kDevices) - 1)(engine)];
  switch (std::uniform_int_distribution<int>(0, 5)(engine)) {
    case 0: {  // a view up to a device and back
      const auto size = static_cast<std::int64_t>(shared.bytes.size());
      const std::int64_t begin = std::uniform_int_distribution<std::int64_t>(0, size - 1)(engine);
      const std::int64_t end =
          std::uniform_int_distribution<std::int64_t>(begin, std::min(size, begin + 300000))(engine);
      Array moved = device_put(runtime, under_test.bytes_on_cpu.slice(begin, end), target);
      Array back = device_put(runtime, moved, kCpu0);
      const auto values = back.to_vector<std::uint8_t>();
      if (!std::equal(values.begin(), values.end(), shared.bytes.begin() + begin) ||
          values.size() != static_cast<std::size_t>(end - begin)) {
        return "device_put round trip through " + target.selector() + " changed the data";
      }
      return {};
    }
    case 1: {  // from the shared device array
      if (under_test.bytes_on_sim.to_vector<std::uint8_t>() != shared.bytes) return "the shared sim array changed";
      if (device_put(runtime, under_test.bytes_on_sim, target).to_vector<std::uint8_t>() != shared.bytes) {
        return "device_put sim:1 -> " + target.selector() + " changed the data";
      }
      return {};
    }
    case 2: {  // a batch of windows
      constexpr std::int64_t kLength = 17;
      std::vector<std::int64_t> offsets(std::uniform_int_distribution<std::size_t>(0, 12)(engine));
      const auto last = static_cast<std::int64_t>(shared.tokens.size()) - kLength;
      for (auto& offset : offsets) offset = std::uniform_int_distribution<std::int64_t>(0, last)(engine);
      const auto values =
          take_windows(runtime, under_test.tokens, offsets, kLength, target, DType::kI32).to_vector<std::int32_t>();
      for (std::size_t row = 0; row < offsets.size(); ++row) {
        for (std::size_t index = 0; index < kLength; ++index) {
          if (values[row * kLength + index] != shared.tokens[static_cast<std::size_t>(offsets[row]) + index]) {
            return "take_windows onto " + target.selector() + " gathered the wrong tokens";
          }
        }
      }
      return {};
    }
    case 3: {  // nested scoped overrides, restored on exit, invisible to other threads
      const auto before = runtime.default_device();
      {
        DefaultDeviceScope outer(runtime, target);
        if (runtime.default_device().device != target) return "scope did not set " + target.selector();
        {
          DefaultDeviceScope inner(runtime, kSim1);
          const auto inside = runtime.default_device();
          if (inside.device != kSim1 || inside.source != DeviceSource::kScopedOverride) return "nested scope";
          // Re-entered on another thread, as a data loader would.
          std::optional<Device> captured = runtime.current_scoped_device();
          std::optional<Device> seen_there;
          std::thread([&] {
            DefaultDeviceScope again(runtime, captured);
            seen_there = runtime.default_device().device;
          }).join();
          if (seen_there != kSim1) return "captured scope not re-entered";
        }
        if (runtime.default_device().device != target) return "inner scope not restored";
      }
      const auto after = runtime.default_device();
      if (after.device != before.device || after.source != before.source) return "outer scope not restored";
      return {};
    }
    case 4: {  // a whole file onto a device: zero-copy on cpu, streamed to sim
      const auto loaded = safetensors::load(runtime, shared.safetensors_file, target);
      if (loaded.tensors.at("tokens").to_vector<std::uint16_t>() != shared.tokens ||
          loaded.tensors.at("small").to_vector<std::uint8_t>() != std::vector<std::uint8_t>{1, 2, 3, 4}) {
        return "safetensors::load onto " + target.selector() + " read the wrong data";
      }
      return {};
    }
    default: {  // the header alone
      const auto header = safetensors::read_header(shared.safetensors_file);
      const auto* tensor = header.find("tokens");
      if (tensor == nullptr || tensor->shape != std::vector<std::uint64_t>{shared.tokens.size()} ||
          tensor->dtype != "U16" || header.tensors.size() != 2 || !header.metadata ||
          header.metadata->at("purpose") != "stress") {
        return "read_header disagreed with what was saved";
      }
      return {};
    }
  }
}

}  // namespace

TEST_CASE("[stress] threads mixing transfers, windows, scopes and header reads on shared runtimes stay correct") {
  const int thread_count = from_environment("BACKPLANE_STRESS_THREADS", 8, 1, 256);
  const int seconds = from_environment("BACKPLANE_STRESS_SECONDS", 2, 0, 24 * 3600);
  MESSAGE(thread_count << " threads for " << seconds << " s");

  Shared shared;
  shared.bytes = random_bytes((1u << 20) + 13, 99);
  shared.tokens.resize(shared.bytes.size() / 2);
  std::memcpy(shared.tokens.data(), shared.bytes.data(), shared.tokens.size() * 2);
  TempDir directory;
  shared.safetensors_file = directory / "stress.safetensors";
  const std::vector<std::uint8_t> small = {1, 2, 3, 4};
  const safetensors::HostTensor tensors[] = {
      {{"tokens", "U16", {shared.tokens.size()}},
       {reinterpret_cast<const std::byte*>(shared.tokens.data()), shared.tokens.size() * 2}},
      {{"small", "U8", {4}}, {reinterpret_cast<const std::byte*>(small.data()), small.size()}},
  };
  safetensors::save(shared.safetensors_file, tensors, safetensors::Metadata{{"purpose", "stress"}});

  // Two runtimes, one with a slow simulated device so transfers overlap.
  std::vector<std::unique_ptr<RuntimeUnderTest>> runtimes;
  for (const char* delay : {"0", "200"}) {
    auto under_test = std::make_unique<RuntimeUnderTest>(placement_options({{"copy_delay_us", delay}}));
    Runtime& runtime = under_test->runtime;
    under_test->bytes_on_cpu = u8_array(runtime, kCpu0, shared.bytes);
    under_test->bytes_on_sim = device_put(runtime, under_test->bytes_on_cpu, kSim1);
    under_test->tokens =
        Array::from_host(runtime, kCpu0, DType::kU16, {static_cast<std::int64_t>(shared.tokens.size())},
                         shared.tokens.data(), shared.tokens.size() * 2);
    runtimes.push_back(std::move(under_test));
  }

  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  std::atomic<long> steps{0};
  std::vector<std::string> failures(static_cast<std::size_t>(thread_count));
  std::vector<std::thread> threads;
  for (int thread = 0; thread < thread_count; ++thread) {
    threads.emplace_back([&, thread] {
      std::mt19937 engine(static_cast<std::uint32_t>(1000 + thread));
      // At least a few steps each, however short the run.
      for (int done = 0; done < 5 || std::chrono::steady_clock::now() < deadline; ++done) {
        RuntimeUnderTest& under_test = *runtimes[static_cast<std::size_t>(done + thread) % runtimes.size()];
        try {
          std::string problem = step(under_test, shared, engine);
          if (!problem.empty()) {
            failures[static_cast<std::size_t>(thread)] = problem;
            return;
          }
        } catch (const std::exception& error) {
          failures[static_cast<std::size_t>(thread)] = error.what();
          return;
        }
        ++steps;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  MESSAGE(steps.load() << " steps");
  for (const auto& failure : failures) CHECK_MESSAGE(failure.empty(), failure);

  for (auto& under_test : runtimes) {
    under_test->bytes_on_cpu = Array();
    under_test->bytes_on_sim = Array();
    under_test->tokens = Array();
    for (const Device& device : kDevices) {
      CAPTURE(device.selector());
      const MemoryStats stats = memory_stats(under_test->runtime, device);
      CHECK(stats.in_use == 0);
      CHECK(stats.pinned_in_use == 0);
    }
  }
}
