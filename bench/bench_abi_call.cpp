// Cost of one call from the core through the Backend ABI into a plugin
// (table lookup, args struct, status check), against a direct call of a
// function doing the same work, measured in the same run.
#include "bench_util.hpp"
#include "registry/runtime_impl.hpp"

#include <backplane/backplane.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <vector>

namespace {

// The work the plugin's device_count does, minus the ABI: read a field.
struct DirectBackend {
  int count = 1;
};

[[gnu::noinline]] int direct_device_count(const DirectBackend* backend) { return backend->count; }

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  using namespace backplane;
  if (argc != 2) {
    fmt::print(stderr, "usage: bench_abi_call PLUGIN_DIR\n");
    return 2;
  }
  Runtime::Options options;
  options.plugin_paths = {argv[1]};
  options.ignore_environment = true;
  options.skip_default_paths = true;
  Runtime runtime(options);
  backplane::detail::Backend& cpu = backplane::detail::RuntimeAccess::registry(runtime).live_backend("cpu");

  // Short direct and ABI blocks alternate, and each pair gives a ratio. On a
  // shared machine a block long enough to be preempted measures the other
  // processes: long blocks of the slower call are preempted more often, and
  // two medians taken seconds apart see different loads. Blocks of tens of
  // microseconds are rarely preempted, and the median pair is one that was not.
  constexpr int kCalls = 20'000;
  constexpr int kPairs = 2'001;
  DirectBackend direct;
  std::vector<double> direct_ns;
  std::vector<double> abi_ns;
  std::vector<double> ratios;
  for (int pair = 0; pair < kPairs; ++pair) {
    const double direct_seconds = bench::median_seconds(1, [&] {
      for (int i = 0; i < kCalls; ++i) bench::keep(direct_device_count(&direct));
    });
    const double abi_seconds = bench::median_seconds(1, [&] {
      for (int i = 0; i < kCalls; ++i) bench::keep(cpu.device_count());
    });
    direct_ns.push_back(direct_seconds / kCalls * 1e9);
    abi_ns.push_back(abi_seconds / kCalls * 1e9);
    ratios.push_back(abi_seconds / direct_seconds);
  }
  const double direct_median = median(direct_ns);
  const double abi_median = median(abi_ns);
  const double fastest_direct = *std::min_element(direct_ns.begin(), direct_ns.end());
  const double fastest_abi = *std::min_element(abi_ns.begin(), abi_ns.end());
  fmt::print("abi call (device_count through the table): {:.2f} ns/call (median of {} x {} calls; fastest {:.2f})\n",
             abi_median, kPairs, kCalls, fastest_abi);
  fmt::print("direct call (same work, no ABI):            {:.2f} ns/call (fastest {:.2f})\n", direct_median,
             fastest_direct);
  fmt::print(
      "ratio abi/direct: {:.1f}x (median of {} paired blocks; fastest/fastest {:.1f}x), overhead {:.2f} ns/call\n",
      median(ratios), kPairs, fastest_abi / fastest_direct, abi_median - direct_median);
  return 0;
}
