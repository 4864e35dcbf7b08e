// Flags ("--name=value", so the benchmarks can run small) and paired timing
// for the placement benchmarks.
#pragma once

#include "../bench_util.hpp"

#include <backplane/backplane.hpp>

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace backplane::bench {

// A runtime's options that see only the plugins in `dirs`: no environment,
// no default directories, so a benchmark measures the plugins it names.
inline Runtime::Options isolated_options(const std::vector<std::string>& dirs) {
  Runtime::Options options;
  for (const auto& dir : dirs) options.plugin_paths.emplace_back(dir);
  options.ignore_environment = true;
  options.skip_default_paths = true;
  return options;
}

class Flags {
 public:
  Flags(int argc, char** argv) {
    for (int index = 1; index < argc; ++index) arguments_.emplace_back(argv[index]);
  }

  // The arguments that are not --flags, in order.
  std::vector<std::string> positional() const {
    std::vector<std::string> values;
    for (const auto& argument : arguments_) {
      if (argument.rfind("--", 0) != 0) values.push_back(argument);
    }
    return values;
  }

  std::optional<std::string> text(std::string_view name) const {
    const std::string prefix = "--" + std::string(name) + "=";
    for (const auto& argument : arguments_) {
      if (argument.rfind(prefix, 0) == 0) return argument.substr(prefix.size());
    }
    return std::nullopt;
  }

  // "--name" alone: a switch.
  bool has(std::string_view name) const {
    const std::string flag = "--" + std::string(name);
    return std::find(arguments_.begin(), arguments_.end(), flag) != arguments_.end();
  }

  std::int64_t integer(std::string_view name, std::int64_t fallback) const {
    const auto value = text(name);
    return value ? std::strtoll(value->c_str(), nullptr, 10) : fallback;
  }

  // "256,512,1024"
  std::vector<std::int64_t> integers(std::string_view name, std::vector<std::int64_t> fallback) const {
    const auto value = text(name);
    if (!value) return fallback;
    std::vector<std::int64_t> values;
    std::size_t start = 0;
    while (start <= value->size()) {
      std::size_t end = value->find(',', start);
      if (end == std::string::npos) end = value->size();
      if (end > start) values.push_back(std::strtoll(value->substr(start, end - start).c_str(), nullptr, 10));
      start = end + 1;
    }
    return values;
  }

 private:
  std::vector<std::string> arguments_;
};

// Medians of `baseline` and `ours`, timed alternately so that load from
// other processes drifting over the run hits both sides alike.
template <class Baseline, class Ours>
std::pair<double, double> paired_medians(int repeats, Baseline&& baseline, Ours&& ours) {
  std::vector<double> baseline_samples;
  std::vector<double> our_samples;
  for (int repeat = 0; repeat < repeats; ++repeat) {
    baseline_samples.push_back(median_seconds(1, baseline));
    our_samples.push_back(median_seconds(1, ours));
  }
  std::sort(baseline_samples.begin(), baseline_samples.end());
  std::sort(our_samples.begin(), our_samples.end());
  return {baseline_samples[baseline_samples.size() / 2], our_samples[our_samples.size() / 2]};
}

// A token file of random uint16 in a scratch directory, deleted with the object.
struct TokenFile {
  std::string path;
  std::uint64_t bytes = 0;
  ~TokenFile() {
    if (!path.empty()) ::unlink(path.c_str());
  }
};

// Random tokens, written in 64 MiB pieces and flushed to disk (so that a
// benchmark can later drop them from the page cache).
inline bool write_tokens(const std::string& path, std::uint64_t bytes) {
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) return false;
  std::vector<std::uint64_t> piece((64u << 20) / 8);
  std::uint64_t state = 0x9E3779B97F4A7C15ull;
  for (std::uint64_t written = 0; written < bytes;) {
    for (auto& word : piece) {  // xorshift64: fast enough not to dominate
      state ^= state << 13;
      state ^= state >> 7;
      state ^= state << 17;
      word = state;
    }
    const std::uint64_t n = std::min<std::uint64_t>(piece.size() * 8, bytes - written);
    if (std::fwrite(piece.data(), 1, n, file) != n) {
      std::fclose(file);
      return false;
    }
    written += n;
  }
  const bool flushed = std::fflush(file) == 0 && ::fsync(::fileno(file)) == 0;
  return std::fclose(file) == 0 && flushed;
}

}  // namespace backplane::bench
