// The cost of tracing: take_windows B=32, T=1024 (U16 tokens widened to I64)
// onto cpu:0 and onto the simulated accelerator sim:0, with tracing off and on
// in the same run (goal: on within 5% of off). Off is the library as shipped:
// every hook is one relaxed atomic load. The trace file's writing is not
// timed; it happens between runs. --off-only measures tracing off alone (and
// works in a build whose hooks are compiled out): bench/trace/hooks-compiled-out
// runs it from two builds in turn.
//
//   bench_trace PLUGIN_DIR FIXTURE_DIR [--steps=2000] [--repeats=9] [--batch=32] [--length=1024] [--off-only]
#include "../bench_util.hpp"
#include "../placement/placement_bench.hpp"

#include <backplane/array.hpp>
#include <backplane/trace.hpp>

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <random>
#include <vector>

namespace {

using namespace backplane;

double median(std::vector<double> samples) {
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const bench::Flags flags(argc, argv);
  if (flags.positional().size() != 2) {
    fmt::print(stderr,
               "usage: bench_trace PLUGIN_DIR FIXTURE_DIR [--steps=2000] [--repeats=9] [--batch=32] "
               "[--length=1024] [--off-only]\n");
    return 2;
  }
  const std::int64_t steps = flags.integer("steps", 2000);
  const int repeats = static_cast<int>(flags.integer("repeats", 9));
  const std::int64_t batch = flags.integer("batch", 32);
  const std::int64_t length = flags.integer("length", 1024);
  const bool off_only = flags.has("off-only");

  Runtime::Options options = bench::isolated_options(flags.positional());
  Runtime runtime(options);
  const Device cpu{"cpu", 0};
  const std::int64_t token_count = std::int64_t{32} << 20;  // 64 MiB of U16
  std::vector<std::uint16_t> values(static_cast<std::size_t>(token_count));
  std::mt19937 engine(5);
  for (auto& value : values) value = static_cast<std::uint16_t>(engine());
  Array tokens = Array::from_host(runtime, cpu, DType::kU16, {token_count}, values.data(), values.size() * 2);
  std::uniform_int_distribution<std::int64_t> pick(0, token_count - length);
  std::vector<std::int64_t> offsets(static_cast<std::size_t>(batch * steps));
  for (auto& offset : offsets) offset = pick(engine);

  const auto path = std::filesystem::temp_directory_path() / fmt::format("backplane-bench-trace-{}.json", ::getpid());
  fmt::print("take_windows B={} T={} U16->I64, {} steps per run, medians of {} alternating runs\n", batch, length,
             steps, repeats);
  for (const Device& device : {Device{"cpu", 0}, Device{"sim", 0}}) {
    if (!runtime.is_available(device.backend)) {
      fmt::print("  {}: skipped (backend not available)\n", device.selector());
      continue;
    }
    auto run = [&] {
      const auto start = bench::Clock::now();
      Array previous;
      for (std::int64_t step = 0; step < steps; ++step) {  // one batch in flight while the next is sampled
        Array next =
            take_windows(runtime, tokens,
                         std::span<const std::int64_t>(offsets.data() + step * batch, static_cast<std::size_t>(batch)),
                         length, device, DType::kI64);
        if (previous.valid()) previous.block_until_ready();
        previous = next;
      }
      previous.block_until_ready();
      return std::chrono::duration<double>(bench::Clock::now() - start).count();
    };
    run();  // warm-up: the allocator's blocks, the page cache
    std::vector<double> off;
    std::vector<double> on;
    std::uintmax_t events = 0;
    for (int repeat = 0; repeat < repeats; ++repeat) {
      off.push_back(run());
      if (off_only) continue;
      trace_start(path, TraceOptions{std::size_t{4} << 20});
      on.push_back(run());
      trace_stop();
      events = std::filesystem::file_size(path);
    }
    const double off_seconds = median(off);
    if (off_only) {
      fmt::print("  {}: off {:9.1f} batches/s ({:6.2f} us/batch)\n", device.selector(), steps / off_seconds,
                 off_seconds / steps * 1e6);
      continue;
    }
    const double on_seconds = median(on);
    fmt::print(
        "  {}: off {:9.1f} batches/s ({:6.2f} us/batch)   on {:9.1f} batches/s ({:6.2f} us/batch)   "
        "on/off time {:.3f} (goal <= 1.05); trace file {:.1f} MiB\n",
        device.selector(), steps / off_seconds, off_seconds / steps * 1e6, steps / on_seconds, on_seconds / steps * 1e6,
        on_seconds / off_seconds, static_cast<double>(events) / (1 << 20));
  }
  std::filesystem::remove(path);
  return 0;
}
