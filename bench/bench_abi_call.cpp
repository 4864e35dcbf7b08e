// Cost of one call from the core through the Backend ABI into a plugin
// (table lookup, args struct, status check), against a direct call of a
// function doing the same work, measured in the same run.
//
//   bench_abi_call PLUGIN_DIR [PJRT_ADAPTER PJRT_LIBRARY]
//
// With the pjrt adapter and a PJRT library (bench/meson.build passes the CPU
// PJRT plugin when the xla-cpu-pjrt wheel is installed), the same for the
// adapter, and a 64-byte copy_to_host through the cpu plugin and through the
// adapter on both data paths: the adapter's cost per call next to the cpu
// plugin's.
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

// ns per call of `call` through the table against the direct call, as
// paired short blocks (see main).
template <class Call>
void paired_row(const char* label, Call&& call) {
  constexpr int kCalls = 20'000;
  constexpr int kPairs = 501;
  DirectBackend direct;
  std::vector<double> direct_ns;
  std::vector<double> abi_ns;
  for (int pair = 0; pair < kPairs; ++pair) {
    direct_ns.push_back(backplane::bench::median_seconds(1,
                                                         [&] {
                                                           for (int i = 0; i < kCalls; ++i)
                                                             backplane::bench::keep(direct_device_count(&direct));
                                                         }) /
                        kCalls * 1e9);
    abi_ns.push_back(backplane::bench::median_seconds(1,
                                                      [&] {
                                                        for (int i = 0; i < kCalls; ++i) call();
                                                      }) /
                     kCalls * 1e9);
  }
  fmt::print("{}: {:.2f} ns/call, overhead {:.2f} ns/call over the direct call\n", label, median(abi_ns),
             median(abi_ns) - median(direct_ns));
}

// ns per 64-byte copy_to_host through `backend` (device 0).
void copy_row(const char* label, backplane::detail::Backend& backend) {
  constexpr int kCopies = 2'000;
  auto allocation = backend.allocate(0, BP_MEMORY_DEVICE, 64);
  std::vector<unsigned char> host(64, 1);
  backend.copy_to_device(0, allocation.buffer, 0, host.data(), host.size());
  const double seconds = backplane::bench::median_seconds(21, [&] {
    for (int i = 0; i < kCopies; ++i) backend.copy_to_host(0, allocation.buffer, 0, host.data(), host.size());
  });
  backend.free(allocation.buffer);
  fmt::print("{}: {:.0f} ns per 64-byte copy_to_host (median of 21 x {})\n", label, seconds / kCopies * 1e9, kCopies);
}

void pjrt_rows(const char* adapter, const char* library, backplane::detail::Backend& cpu) {
  using namespace backplane;
  copy_row("cpu plugin", cpu);
  for (const char* data_path : {"host", "copy"}) {
    Runtime::Options options;
    options.plugin_paths = {adapter};
    options.ignore_environment = true;
    options.skip_default_paths = true;
    PluginSource source;  // the backend pjrt_xla_cpu
    source.name = "xla_cpu";
    source.path = library;
    options.sources = {source};
    options.backend_options["pjrt_xla_cpu"] = {{"data_path", data_path}};
    Runtime runtime(options);
    if (!runtime.is_available("pjrt_xla_cpu")) {
      const BackendInfo* backend = runtime.find_backend("pjrt_xla_cpu");
      fmt::print("pjrt_xla_cpu ({}): unavailable: {}\n", data_path,
                 backend != nullptr ? backend->reason : std::string("not found"));
      return;
    }
    detail::Backend& pjrt = detail::RuntimeAccess::registry(runtime).live_backend("pjrt_xla_cpu");
    if (std::string_view(data_path) == "host") {
      paired_row("abi call into the pjrt adapter (device_count through the table)",
                 [&] { bench::keep(pjrt.device_count()); });
      paired_row("abi call into the cpu plugin, same blocks  (device_count through the table)",
                 [&] { bench::keep(cpu.device_count()); });
    }
    // The cpu plugin's row beside it, in the same conditions: the PJRT CPU
    // client's worker threads share the machine's cores with this loop.
    if (std::string_view(data_path) == "host") copy_row("cpu plugin, with the PJRT client alive", cpu);
    copy_row(std::string_view(data_path) == "host" ? "pjrt adapter, data path host" : "pjrt adapter, data path copy",
             pjrt);
  }
}

int main(int argc, char** argv) {
  using namespace backplane;
  if (argc != 2 && argc != 4) {
    fmt::print(stderr, "usage: bench_abi_call PLUGIN_DIR [PJRT_ADAPTER PJRT_LIBRARY]\n");
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
  if (argc == 4) pjrt_rows(argv[2], argv[3], cpu);
  return 0;
}
