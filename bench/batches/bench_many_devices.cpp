// A batch stream over N devices whose copies are capped, against N times one
// device's rate measured in the same run: do the devices' copies run at
// once, each on its own copy engine, so that the aggregate is the sum of
// their bandwidths? The devices are the test backend's sim devices, each
// with a copy engine capped at --cap-mib MiB/s (its copy_bytes_per_second),
// so it runs on any machine; a GPU machine's row is bench/gpu's.
//
//   bench_many_devices PLUGIN_DIR SIM_DIR [--cap-mib=64] [--devices=1,2,4,8]
//       [--piece-kib=1024] [--steps=48] [--context=1023]
//
// Each device gets a piece of --piece-kib per step (its rows of the step's
// global batch); the stream hands out --steps steps after 4 of warm-up. The
// goal: aggregate >= 0.9 x N x the one-device rate, and x N x cap.
#include "../placement/placement_bench.hpp"

#include <backplane/array.hpp>
#include <backplane/batch_stream.hpp>

#include <fmt/format.h>

#include <cstdio>
#include <string>
#include <vector>

namespace {

using namespace backplane;
using bench::Clock;

struct Figures {
  double bytes_per_second = 0;
  double seconds = 0;
};

// Steps of a stream over `devices` capped sim devices: bytes handed out per
// second of wall time, after a warm-up that fills the prefetch queue.
Figures stream_rate(const std::vector<std::string>& dirs, std::int64_t devices, std::uint64_t cap,
                    std::int64_t rows_per_device, std::int64_t context, std::int64_t steps) {
  Runtime::Options options = bench::isolated_options(dirs);
  options.backend_options["sim"] = {{"devices", std::to_string(devices)},
                                    {"copy_bytes_per_second", std::to_string(cap)},
                                    {"memory_limit", std::to_string(std::uint64_t{4} << 30)}};
  Runtime runtime(options);
  std::vector<std::uint16_t> tokens(std::size_t{64} << 20);
  for (std::size_t index = 0; index < tokens.size(); ++index) tokens[index] = static_cast<std::uint16_t>(index * 7);
  const Array source = Array::from_host(runtime, Device{"cpu", 0}, DType::kU16,
                                        {static_cast<std::int64_t>(tokens.size())}, tokens.data(), tokens.size() * 2);
  BatchStreamOptions stream_options;
  stream_options.batch_size = rows_per_device * devices;
  stream_options.context = context;
  for (std::int64_t device = 0; device < devices; ++device) {
    stream_options.devices.push_back(Device{"sim", static_cast<std::int32_t>(device)});
  }
  stream_options.prefetch = 4;
  stream_options.seed = 1;
  BatchStream stream(runtime, {source}, stream_options);
  for (int warm = 0; warm < 4; ++warm) stream.next();
  std::uint64_t bytes = 0;
  const Clock::time_point start = Clock::now();
  for (std::int64_t step = 0; step < steps; ++step) {
    for (const Array& piece : stream.next()) bytes += piece.nbytes();
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return {static_cast<double>(bytes) / seconds, seconds};
}

}  // namespace

int main(int argc, char** argv) {
  const bench::Flags flags(argc, argv);
  const std::vector<std::string> dirs = flags.positional();
  if (dirs.size() != 2) {
    std::fprintf(stderr,
                 "usage: bench_many_devices PLUGIN_DIR SIM_DIR [--cap-mib=64] [--devices=1,2,4,8] "
                 "[--piece-kib=1024] [--steps=48] [--context=1023]\n");
    return 2;
  }
  const double mib = 1024.0 * 1024.0;
  const auto cap = static_cast<std::uint64_t>(flags.integer("cap-mib", 64) * (1 << 20));
  const std::int64_t context = flags.integer("context", 1023);
  const std::int64_t row_bytes = (context + 1) * 2;
  const std::int64_t rows = std::max<std::int64_t>(1, flags.integer("piece-kib", 1024) * 1024 / row_bytes);
  const std::int64_t steps = flags.integer("steps", 48);
  fmt::print(
      "batch stream over N sim devices, each copy engine capped at {:.0f} MiB/s; {} rows x {} tokens "
      "(uint16) = {:.2f} MiB per device per step, {} steps\n",
      static_cast<double>(cap) / mib, rows, context + 1, static_cast<double>(rows * row_bytes) / mib, steps);
  const Figures one = stream_rate(dirs, 1, cap, rows, context, steps);
  fmt::print("{:>3} {:>14} {:>10} {:>16} {:>16}\n", "N", "aggregate MiB/s", "seconds", "/ (N x one device)",
             "/ (N x cap)");
  for (const std::int64_t devices : flags.integers("devices", {1, 2, 4, 8})) {
    const Figures many = devices == 1 ? one : stream_rate(dirs, devices, cap, rows, context, steps);
    fmt::print("{:>3} {:>14.1f} {:>10.2f} {:>16.3f} {:>16.3f}\n", devices, many.bytes_per_second / mib, many.seconds,
               many.bytes_per_second / (static_cast<double>(devices) * one.bytes_per_second),
               many.bytes_per_second / (static_cast<double>(devices) * static_cast<double>(cap)));
  }
  fmt::print("goal: >= 0.9 in both ratio columns\n");
  return 0;
}
