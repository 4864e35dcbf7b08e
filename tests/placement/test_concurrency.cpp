// device_put and take_windows from eight threads at once on shared arrays.
#include "support/placement_fixture.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>

using namespace backplane;
using namespace backplane::testing;

TEST_CASE("[placement] device_put and take_windows from 8 threads on shared arrays are correct") {
  Runtime runtime(placement_options({{"copy_delay_us", "50"}}));
  const auto bytes = random_bytes((2u << 20) + 6, 77);
  Array shared_cpu = u8_array(runtime, kCpu0, bytes);
  Array shared_sim = device_put(runtime, shared_cpu, kSim1);
  const std::vector<std::uint16_t> tokens = [&] {
    std::vector<std::uint16_t> values(bytes.size() / 2);
    std::memcpy(values.data(), bytes.data(), values.size() * 2);
    return values;
  }();
  Array shared_tokens = Array::from_host(runtime, kCpu0, DType::kU16, {static_cast<std::int64_t>(tokens.size())},
                                         tokens.data(), tokens.size() * 2);

  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int thread = 0; thread < 8; ++thread) {
    threads.emplace_back([&, thread] {
      std::mt19937 engine(static_cast<std::uint32_t>(thread));
      const Device targets[] = {kCpu1, Device{"cpu", 2}, kSim0, kSim1};
      for (int step = 0; step < 12; ++step) {
        const Device& target = targets[(thread + step) % 4];
        try {
          // Whole arrays, both directions, plus views.
          const std::int64_t begin = std::uniform_int_distribution<std::int64_t>(0, 1000)(engine);
          Array from_cpu = device_put(runtime, shared_cpu.slice(begin, begin + 70000), target);
          Array from_sim = device_put(runtime, shared_sim, target);
          std::vector<std::int64_t> offsets(8);
          for (auto& offset : offsets) {
            offset =
                std::uniform_int_distribution<std::int64_t>(0, static_cast<std::int64_t>(tokens.size()) - 33)(engine);
          }
          Array batch = take_windows(runtime, shared_tokens, offsets, 33, target, DType::kI32);

          const auto part = from_cpu.to_vector<std::uint8_t>();
          if (!std::equal(part.begin(), part.end(), bytes.begin() + begin)) ++failures;
          if (from_sim.to_vector<std::uint8_t>() != bytes) ++failures;
          const auto windows = batch.to_vector<std::int32_t>();
          for (std::size_t row = 0; row < offsets.size(); ++row) {
            for (std::size_t index = 0; index < 33; ++index) {
              if (windows[row * 33 + index] != tokens[static_cast<std::size_t>(offsets[row]) + index]) ++failures;
            }
          }
        } catch (const std::exception& error) {
          ++failures;
          MESSAGE(error.what());
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  CHECK(failures.load() == 0);
  for (const Device& device : {kCpu1, kSim0}) {
    CAPTURE(device.selector());
    CHECK(memory_stats(runtime, device).in_use == 0);  // every block went back to the cache
  }
  CHECK(memory_stats(runtime, kSim0).pinned_in_use == 0);
  CHECK(memory_stats(runtime, kSim1).pinned_in_use == 0);
}
