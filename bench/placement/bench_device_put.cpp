// device_put between two CPU devices against a plain memcpy of the same
// bytes, measured in the same run (goal: ratio >= 0.9).
//
//   bench_placement_device_put PLUGIN_DIR [--sizes-mib=256,512,1024] [--repeats=5]
#include "placement_bench.hpp"

#include <backplane/array.hpp>

#include <fmt/format.h>

#include <cstring>
#include <memory>

int main(int argc, char** argv) {
  using namespace backplane;
  const bench::Flags flags(argc, argv);
  const auto positional = flags.positional();
  if (positional.size() != 1) {
    fmt::print(stderr, "usage: bench_placement_device_put PLUGIN_DIR [--sizes-mib=256,512,1024] [--repeats=5]\n");
    return 2;
  }
  Runtime::Options options = bench::isolated_options({positional[0]});
  options.backend_options["cpu"] = {{"devices", "2"}};
  Runtime runtime(options);
  const Device cpu0{"cpu", 0};
  const Device cpu1{"cpu", 1};
  const int repeats = static_cast<int>(flags.integer("repeats", 5));

  fmt::print(
      "device_put cpu:0 -> cpu:1 against memcpy of the same bytes (medians of {} alternating runs after a warm-up)\n",
      repeats);
  for (const std::int64_t mib : flags.integers("sizes-mib", {256, 512, 1024})) {
    const auto size = static_cast<std::size_t>(mib) << 20;
    Array source;
    {
      std::vector<std::uint8_t> bytes(size);
      for (std::size_t index = 0; index < size; index += 4096)
        bytes[index] = static_cast<std::uint8_t>(index >> 12 | 1);
      source = Array::from_host(runtime, cpu0, DType::kU8, {static_cast<std::int64_t>(size)}, bytes.data(), size);
    }
    // The baseline's destination is touched first, as the caching allocator's
    // reused block is after the warm-up.
    std::unique_ptr<std::uint8_t[]> destination(new std::uint8_t[size]);
    std::memset(destination.get(), 1, size);
    const void* from = source.host_data();

    auto run_memcpy = [&] {
      std::memcpy(destination.get(), from, size);
      bench::keep(destination[size - 1]);
    };
    auto run_put = [&] {
      Array moved = device_put(runtime, source, cpu1);
      moved.block_until_ready();
    };
    run_memcpy();
    run_put();
    const auto [memcpy_seconds, put_seconds] = bench::paired_medians(repeats, run_memcpy, run_put);
    const double gb = static_cast<double>(size) / 1e9;
    fmt::print(
        "  {:5} MiB: device_put {:8.2f} ms ({:6.2f} GB/s)   memcpy {:8.2f} ms ({:6.2f} GB/s)   ratio {:.2f} "
        "(goal >= 0.9)\n",
        mib, put_seconds * 1e3, gb / put_seconds, memcpy_seconds * 1e3, gb / memcpy_seconds,
        memcpy_seconds / put_seconds);
    empty_cache(runtime, cpu1);  // keep only one size's block alive at a time
  }
  return 0;
}
