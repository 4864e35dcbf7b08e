// Timing helpers shared by the benchmarks: medians of repeated runs.
#pragma once

#include <algorithm>
#include <chrono>
#include <vector>

namespace backplane::bench {

using Clock = std::chrono::steady_clock;

// Runs `body` `repeats` times and returns the median wall time in seconds.
template <class Body>
double median_seconds(int repeats, Body&& body) {
  std::vector<double> samples;
  samples.reserve(static_cast<std::size_t>(repeats));
  for (int i = 0; i < repeats; ++i) {
    auto start = Clock::now();
    body();
    samples.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

// Keeps the compiler from discarding a computed value.
template <class T>
inline void keep(T const& value) {
  asm volatile("" : : "r,m"(value) : "memory");
}

}  // namespace backplane::bench
