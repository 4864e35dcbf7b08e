// Cost of one call from the core through the Backend ABI into a plugin
// (table lookup, args struct, status check), against a direct call of a
// function doing the same work, measured in the same run.
#include "bench_util.hpp"
#include "registry/runtime_impl.hpp"

#include <backplane/backplane.hpp>

#include <fmt/format.h>

#include <cstdio>

namespace {

// The work the plugin's device_count does, minus the ABI: read a field.
struct DirectBackend {
  int count = 1;
};

[[gnu::noinline]] int direct_device_count(const DirectBackend* backend) { return backend->count; }

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

  constexpr int kCalls = 2'000'000;
  constexpr int kRepeats = 15;
  DirectBackend direct;
  double direct_seconds = bench::median_seconds(kRepeats, [&] {
    for (int i = 0; i < kCalls; ++i) bench::keep(direct_device_count(&direct));
  });
  double abi_seconds = bench::median_seconds(kRepeats, [&] {
    for (int i = 0; i < kCalls; ++i) bench::keep(cpu.device_count());
  });
  double direct_ns = direct_seconds / kCalls * 1e9;
  double abi_ns = abi_seconds / kCalls * 1e9;
  fmt::print("abi call (device_count through the table): {:.2f} ns/call (median of {} x {} calls)\n", abi_ns, kRepeats,
             kCalls);
  fmt::print("direct call (same work, no ABI):            {:.2f} ns/call\n", direct_ns);
  fmt::print("ratio abi/direct: {:.1f}x, overhead {:.2f} ns/call\n", abi_ns / direct_ns, abi_ns - direct_ns);
  return 0;
}
