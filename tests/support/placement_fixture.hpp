// Runtimes and data for the placement tests: cpu with four devices and the
// simulated accelerator with two, no process environment, no config file.
#pragma once

#include "support/errors.hpp"

#include <backplane/array.hpp>
#include <backplane/backplane.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace backplane::testing {

using Pairs = std::vector<std::pair<std::string, std::string>>;

inline Runtime::Options placement_options(Pairs sim_options = {}) {
  Runtime::Options options;
  options.plugin_paths = {BP_TEST_PLUGIN_DIR, BP_TEST_FIXTURE_DIR};
  options.skip_default_paths = true;
  options.environment = std::map<std::string, std::string>{};
  options.backend_options["cpu"] = {{"devices", "4"}};
  sim_options.insert(sim_options.begin(), {"devices", "2"});
  options.backend_options["sim"] = std::move(sim_options);
  return options;
}

inline const Device kCpu0{"cpu", 0};
inline const Device kCpu1{"cpu", 1};
inline const Device kCpu2{"cpu", 2};
inline const Device kCpu3{"cpu", 3};
inline const Device kSim0{"sim", 0};
inline const Device kSim1{"sim", 1};

// Random bytes, never zero, so a copy that moved nothing cannot pass.
inline std::vector<std::uint8_t> random_bytes(std::size_t size, std::uint32_t seed = 7) {
  std::mt19937 engine(seed);
  std::uniform_int_distribution<int> byte(1, 255);
  std::vector<std::uint8_t> bytes(size);
  for (auto& value : bytes) value = static_cast<std::uint8_t>(byte(engine));
  return bytes;
}

inline Array u8_array(Runtime& runtime, const Device& device, const std::vector<std::uint8_t>& bytes) {
  return Array::from_host(runtime, device, DType::kU8, {static_cast<std::int64_t>(bytes.size())}, bytes.data(),
                          bytes.size());
}

}  // namespace backplane::testing
