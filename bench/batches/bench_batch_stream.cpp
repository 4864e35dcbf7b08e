// The batch stream against its baselines, each measured in the same run:
//   1. sampling: ns per window of the keyed permutation against independent
//      Philox draws (which give no epoch and no distinctness guarantee);
//   2. cold pages (the file's pages dropped before each pass): windows/s of
//      the stream against a one-thread gather from the mapping (what NumPy
//      memmap fancy indexing does), the same gather on the stream's threads
//      without page advice, and a ceiling: N threads of random preads of one
//      window each on the same file;
//   3. warm: the caller's time per step of next() against take_windows on
//      the caller's thread, and a training loop with a fixed fake step;
//   4. resume: making a stream at step 1,000,000 and taking its first batch,
//      without a schedule and inside one of three entries.
//
//   bench_batch_stream PLUGIN_DIR [--file-mib=1024] [--batches=32,256]
//       [--context=1024] [--steps=200] [--cold-steps=40] [--threads=0]
//       [--compute-ms=5] [--dir=/var/tmp]
//
// The token file (random uint16) is created in --dir and deleted at the end;
// a cold pass needs it not in memory, so it goes on a disk, not tmpfs.
#include "../placement/placement_bench.hpp"
#include "batches/gather_pool.hpp"
#include "batches/philox.hpp"
#include "batches/sampler.hpp"
#include "placement/gather.hpp"

#include <backplane/array.hpp>
#include <backplane/batch_stream.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <fmt/format.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <thread>
#include <vector>

namespace {

using namespace backplane;
using bench::Clock;

double since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

using bench::TokenFile;
using bench::write_tokens;

// Maps the file; the returned array owns the mapping.
Array map_tokens(Runtime& runtime, const TokenFile& file) {
  const int fd = ::open(file.path.c_str(), O_RDONLY | O_CLOEXEC);
  void* address = ::mmap(nullptr, file.bytes, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (address == MAP_FAILED) throw std::runtime_error("mmap failed");
  const std::uint64_t bytes = file.bytes;
  std::shared_ptr<const void> owner(address, [bytes](const void* p) { ::munmap(const_cast<void*>(p), bytes); });
  return Array::wrap_host(runtime, Device{"cpu", 0}, DType::kU16, {static_cast<std::int64_t>(bytes / 2)}, address,
                          owner);
}

// Drops the file's pages from the page cache (none may be mapped then).
void drop_cache(const TokenFile& file) {
  const int fd = ::open(file.path.c_str(), O_RDONLY | O_CLOEXEC);
  ::fdatasync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

// A sampler of one segment of `batch` windows over sources of `starts`.
detail::WindowSampler sampler_of(std::vector<std::uint64_t> starts, std::vector<double> weights, std::uint64_t batch,
                                 BatchStreamState::Mixture mixture = BatchStreamState::Mixture::kInterleaved) {
  detail::Segment segment;
  segment.global_batch = batch;
  segment.context = 1;
  segment.weights = std::move(weights);
  segment.starts = std::move(starts);
  return detail::WindowSampler(1, {segment}, mixture);
}

void sampling(std::uint64_t starts) {
  constexpr std::uint64_t kBatch = 256;
  constexpr int kSteps = 4000;
  const detail::WindowSampler permuted = sampler_of({starts}, {}, kBatch);
  const std::vector<std::uint64_t> halves = {starts / 2, starts - starts / 2};
  const detail::WindowSampler weighted = sampler_of(halves, {0.3, 0.7}, kBatch);
  const detail::WindowSampler per_sample =
      sampler_of(halves, {0.3, 0.7}, kBatch, BatchStreamState::Mixture::kPerSample);
  std::vector<Window> out(kBatch);
  std::uint64_t sink = 0;
  const double independent = bench::median_seconds(5, [&] {
    for (std::uint64_t step = 0; step < kSteps; ++step) {
      for (std::uint64_t index = 0; index < kBatch; ++index) {
        sink += detail::philox4x64_10({step, index, 3, 0}, {1, 0})[0] % starts;
      }
    }
  });
  const auto time = [&](const detail::WindowSampler& sampler) {
    return bench::median_seconds(5, [&] {
      for (std::uint64_t step = 0; step < kSteps; ++step) {
        sampler.draw(step, 0, out);
        sink += static_cast<std::uint64_t>(out[0].start);
      }
    });
  };
  const double permutation = time(permuted);
  const double with_weights = time(weighted);
  const double drawn_per_sample = time(per_sample);
  bench::keep(sink);
  const double draws = kSteps * static_cast<double>(kBatch);
  fmt::print(
      "sampling, {} starts, B=256: independent Philox draws {:.1f} ns/window; keyed permutation {:.1f} "
      "ns/window ({:.2f}x); weighted (2 sources), dealt {:.1f} ns/window, per sample (states version 1 and 2) "
      "{:.1f} ns/window\n",
      starts, independent / draws * 1e9, permutation / draws * 1e9, permutation / independent,
      with_weights / draws * 1e9, drawn_per_sample / draws * 1e9);
}

// Windows per second of `pass` over `steps` steps of B windows, the file cold.
template <class Pass>
double cold_rate(const TokenFile& file, std::int64_t batch, std::int64_t steps, Pass&& pass) {
  drop_cache(file);
  const Clock::time_point start = Clock::now();
  pass();
  return static_cast<double>(batch * steps) / since(start);
}

void cold(Runtime& runtime, const TokenFile& file, std::int64_t batch, std::int64_t context, std::int64_t steps,
          unsigned threads) {
  const std::int64_t length = context + 1;
  const std::uint64_t row = static_cast<std::uint64_t>(length) * 2;
  const std::uint64_t tokens = file.bytes / 2;
  BatchStreamOptions options;
  options.batch_size = batch;
  options.context = context;
  options.devices = {Device{"cpu", 1}};
  options.threads = threads;
  options.seed = 5;
  std::vector<std::vector<Window>> plan;
  {
    Array source = map_tokens(runtime, file);
    BatchStream stream(runtime, {source}, options);
    for (std::int64_t step = 0; step < steps; ++step) plan.push_back(stream.windows(step));
  }
  std::vector<std::byte> out(static_cast<std::size_t>(batch) * row);

  const double one_thread = cold_rate(file, batch, steps, [&] {
    Array source = map_tokens(runtime, file);
    const auto* data = static_cast<const std::byte*>(source.host_data());
    for (const auto& windows : plan) {
      for (std::size_t index = 0; index < windows.size(); ++index) {
        std::memcpy(out.data() + index * row, data + static_cast<std::uint64_t>(windows[index].start) * 2, row);
      }
    }
  });
  const unsigned pool_threads = threads != 0 ? threads : std::clamp(std::thread::hardware_concurrency(), 4U, 8U);
  const double threads_only = cold_rate(file, batch, steps, [&] {
    Array source = map_tokens(runtime, file);
    const auto* data = static_cast<const std::byte*>(source.host_data());
    detail::GatherPool pool(pool_threads);
    std::vector<const std::byte*> rows(static_cast<std::size_t>(batch));
    for (const auto& windows : plan) {
      for (std::size_t index = 0; index < windows.size(); ++index) {
        rows[index] = data + static_cast<std::uint64_t>(windows[index].start) * 2;
      }
      pool.run(rows.size(), [&](std::size_t begin, std::size_t end) {
        detail::gather_rows(std::span(rows).subspan(begin, end - begin), DType::kU16, length, out.data() + begin * row,
                            DType::kU16);
      });
    }
  });
  const double stream_rate = cold_rate(file, batch, steps, [&] {
    Array source = map_tokens(runtime, file);
    BatchStream stream(runtime, {source}, options);
    for (std::int64_t step = 0; step < steps; ++step) (void)stream.next();
  });
  const double ceiling = cold_rate(file, batch, steps, [&] {
    const int fd = ::open(file.path.c_str(), O_RDONLY | O_CLOEXEC);
    std::atomic<std::size_t> next{0};
    std::vector<std::thread> readers;
    const std::size_t total = plan.size() * static_cast<std::size_t>(batch);
    for (unsigned reader = 0; reader < pool_threads; ++reader) {
      readers.emplace_back([&] {
        std::vector<std::byte> buffer(row);
        for (std::size_t index = next++; index < total; index = next++) {
          const Window& window = plan[index / static_cast<std::size_t>(batch)][index % static_cast<std::size_t>(batch)];
          if (::pread(fd, buffer.data(), row, static_cast<off_t>(window.start) * 2) < 0) std::abort();
        }
      });
    }
    for (std::thread& reader : readers) reader.join();
    ::close(fd);
  });
  (void)tokens;
  fmt::print(
      "cold B={:<4} T={}: one-thread gather (NumPy memmap's way) {:>8.0f} windows/s | {} threads, no advice "
      "{:>8.0f} | stream {:>8.0f} | ceiling ({} threads of pread) {:>8.0f} || stream/one-thread {:.2f}x, "
      "stream/ceiling {:.2f}x\n",
      batch, context, one_thread, pool_threads, threads_only, stream_rate, pool_threads, ceiling,
      stream_rate / one_thread, stream_rate / ceiling);
}

void warm(Runtime& runtime, const TokenFile& file, std::int64_t batch, std::int64_t context, std::int64_t steps,
          double compute_ms) {
  Array source = map_tokens(runtime, file);
  const auto* data = static_cast<const std::byte*>(source.host_data());
  // Warm: read a byte of every page (a load, not just its address).
  std::uint64_t sum = 0;
  for (std::uint64_t offset = 0; offset < file.bytes; offset += 4096) {
    sum += static_cast<std::uint8_t>(*static_cast<const volatile std::byte*>(data + offset));
  }
  bench::keep(sum);
  BatchStreamOptions options;
  options.batch_size = batch;
  options.context = context;
  options.devices = {Device{"cpu", 1}};
  options.dtype = DType::kI64;
  BatchStream stream(runtime, {source}, options);
  std::vector<std::int64_t> offsets(static_cast<std::size_t>(batch));
  std::mt19937_64 engine(3);
  std::uniform_int_distribution<std::int64_t> start(0, static_cast<std::int64_t>(file.bytes / 2) - context - 1);
  for (int step = 0; step < 20; ++step) (void)stream.next();
  const auto [direct, ours] = bench::paired_medians(
      7,
      [&] {
        for (std::int64_t step = 0; step < steps; ++step) {
          for (auto& offset : offsets) offset = start(engine);
          bench::keep(take_windows(runtime, source, offsets, context + 1, Device{"cpu", 1}, DType::kI64));
        }
      },
      [&] {
        for (std::int64_t step = 0; step < steps; ++step) bench::keep(stream.next());
      });
  fmt::print(
      "warm B={:<4} T={} U16->I64 on cpu, back to back (no compute: the producer's throughput bounds it): "
      "take_windows on the caller's thread {:.1f} us a step, stream next() {:.1f} us ({:.2f}x)\n",
      batch, context, direct / steps * 1e6, ours / steps * 1e6, direct / ours);

  // A training loop: each step computes for compute_ms (a busy wait).
  BatchStream loop(runtime, {source}, options);
  for (std::int64_t step = 0; step < 100; ++step) {
    bench::keep(loop.next());
    const Clock::time_point until = Clock::now() + std::chrono::microseconds(static_cast<int>(compute_ms * 1000));
    while (Clock::now() < until) {
    }
  }
  const BatchStreamStats stats = loop.stats();
  const double waited = stats.wait_seconds / static_cast<double>(stats.steps);
  fmt::print(
      "training loop B={:<4} T={} with a {:.0f} ms step: data_stall_fraction {:.4f}; the caller's time per "
      "step {:.1f} us waited in next(), against {:.1f} us for take_windows on the caller's thread ({:.1f}x)\n",
      batch, context, compute_ms, stats.data_stall_fraction, waited * 1e6, direct / steps * 1e6,
      direct / steps / waited);
}

void resume(Runtime& runtime, const TokenFile& file) {
  Array source = map_tokens(runtime, file);
  BatchStreamOptions options;
  options.batch_size = 256;
  options.context = 1024;
  options.devices = {Device{"cpu", 1}};
  BatchStreamState state = BatchStream(runtime, {source}, options).state();
  state.step = 1'000'000;
  const double seconds = bench::median_seconds(7, [&] {
    BatchStream stream(runtime, {source}, options, &state);
    bench::keep(stream.next());
  });
  const double fresh = bench::median_seconds(7, [&] {
    BatchStream stream(runtime, {source}, options);
    bench::keep(stream.next());
  });
  fmt::print(
      "resume at step 1,000,000 to the first batch (B=256, T=1024): {:.2f} ms; a fresh stream at step 0: "
      "{:.2f} ms ({:.2f}x)\n",
      seconds * 1e3, fresh * 1e3, seconds / fresh);

  // Inside a schedule of three entries (a batch-size ramp, then a longer
  // context), with a mixture that changes twice: the same step, found by
  // counting each source's draws in closed form.
  Array other = map_tokens(runtime, file);
  BatchStreamOptions scheduled;
  scheduled.schedule = {{0, 64, 512}, {2000, 128, 512}, {500'000, 256, 1024}};
  scheduled.weight_schedule = {{0, {0.8, 0.2}}, {300'000, {0.5, 0.5}}, {900'000, {0.3, 0.7}}};
  scheduled.devices = options.devices;
  BatchStreamState inside = BatchStream(runtime, {source, other}, scheduled).state();
  inside.step = 1'000'000;
  const double scheduled_seconds = bench::median_seconds(7, [&] {
    BatchStream stream(runtime, {source, other}, scheduled, &inside);
    bench::keep(stream.next());
  });
  fmt::print(
      "resume at step 1,000,000 inside a 3-entry schedule with 3 mixtures (B=256, T=1024 there): {:.2f} ms "
      "({:.2f}x a stream at step 0 without one); goal <= 10 ms\n",
      scheduled_seconds * 1e3, scheduled_seconds / fresh);
}

}  // namespace

int main(int argc, char** argv) {
  const bench::Flags flags(argc, argv);
  const std::vector<std::string> positional = flags.positional();
  if (positional.empty()) {
    std::fprintf(stderr, "usage: bench_batch_stream PLUGIN_DIR [--file-mib=1024] ...\n");
    return 2;
  }
  Runtime::Options runtime_options = bench::isolated_options({positional[0]});
  runtime_options.backend_options["cpu"] = {{"devices", "2"}};
  Runtime runtime(runtime_options);
  TokenFile file;
  file.bytes = static_cast<std::uint64_t>(flags.integer("file-mib", 1024)) << 20;
  file.path = flags.text("dir").value_or("/var/tmp") + fmt::format("/bench-batch-stream-{}.bin", ::getpid());
  if (!write_tokens(file.path, file.bytes)) {
    std::fprintf(stderr, "cannot write %s\n", file.path.c_str());
    return 1;
  }
  const std::int64_t context = flags.integer("context", 1024);
  const std::int64_t steps = flags.integer("steps", 200);
  const std::int64_t cold_steps = flags.integer("cold-steps", 40);
  const auto threads = static_cast<unsigned>(flags.integer("threads", 0));
  sampling(file.bytes / 2 - static_cast<std::uint64_t>(context));
  for (const std::int64_t batch : flags.integers("batches", {32, 256})) {
    cold(runtime, file, batch, context, cold_steps, threads);
  }
  for (const std::int64_t batch : flags.integers("batches", {32, 256})) {
    warm(runtime, file, batch, context, steps, static_cast<double>(flags.integer("compute-ms", 5)));
  }
  resume(runtime, file);
  return 0;
}
