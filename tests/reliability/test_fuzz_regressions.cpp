// Replays the fuzz corpora through the same target bodies the libFuzzer
// executables run (tests/fuzz/targets.cpp), with whatever compiler built the
// suite: every seed, every file a campaign found crashing (kept under
// tests/fuzz/regressions/<target>/ once fixed). The safetensors files written
// by other implementations go through the header target in
// tests/safetensors/test_wild.cpp.
#include "fuzz/targets.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace {

std::vector<std::uint8_t> read_file(const std::filesystem::path& path) {
  std::ifstream stream(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(stream), std::istreambuf_iterator<char>()};
}

// Runs every regular file under `directory` through `target`; returns how many.
int replay(const backplane::fuzz::Target& target, const std::filesystem::path& directory) {
  int count = 0;
  std::error_code error;
  if (!std::filesystem::is_directory(directory, error)) return 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(directory)) {
    if (!entry.is_regular_file()) continue;
    CAPTURE(entry.path().string());
    const auto bytes = read_file(entry.path());
    CHECK_NOTHROW(target.run(bytes));
    ++count;
  }
  return count;
}

}  // namespace

TEST_CASE("[fuzz] every seed and every fixed crash input runs cleanly through its target") {
  for (const auto& target : backplane::fuzz::kTargets) {
    CAPTURE(target.name);
    const int seeds = replay(target, std::filesystem::path(BP_TEST_FUZZ_SEED_DIR) / target.name);
    replay(target, std::filesystem::path(BP_TEST_FUZZ_REGRESSION_DIR) / target.name);
    CHECK(seeds > 0);
  }
}
