// take_windows from a memory-mapped token file onto a CPU device against a
// hand-written gather loop in the same program (goal: ratio >= 0.9), plus
// batches/s; for U16 -> I64 also against memcpy of the same output bytes
// (memory speed, what widening can at best reach); optionally the nanoGPT way
// in Python for comparison.
//
//   bench_placement_take_windows PLUGIN_DIR [--file-mib=2048] [--batches=32,256]
//       [--length=1024] [--steps=200] [--repeats=7]
//       [--python=/usr/bin/python3 --script=nanogpt_sampling.py]
//
// The token file (random uint16) is created in /tmp and deleted at the end.
#include "placement_bench.hpp"

#include <backplane/array.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace {

using namespace backplane;

using bench::TokenFile;
using bench::write_tokens;

// Lines "nanogpt ... batches/s: X" from the Python script, or its "skipped" line.
std::string run_python(const std::string& python, const std::string& script, const std::string& file,
                       std::int64_t batch, std::int64_t length, std::int64_t steps, std::int64_t repeats) {
  const std::string command = fmt::format("'{}' '{}' --file='{}' --batch={} --length={} --steps={} --repeats={} 2>&1",
                                          python, script, file, batch, length, steps, repeats);
  std::FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return "skipped: cannot start " + python;
  std::string output;
  char line[512];
  while (std::fgets(line, sizeof(line), pipe) != nullptr) output += line;
  ::pclose(pipe);
  return output;
}

}  // namespace

int main(int argc, char** argv) {
  const bench::Flags flags(argc, argv);
  const auto positional = flags.positional();
  if (positional.size() != 1) {
    fmt::print(stderr,
               "usage: bench_placement_take_windows PLUGIN_DIR [--file-mib=2048] [--batches=32,256] "
               "[--length=1024] [--steps=200] [--repeats=7] [--python=PY --script=nanogpt_sampling.py]\n");
    return 2;
  }
  Runtime::Options options = bench::isolated_options({positional[0]});
  Runtime runtime(options);
  const Device cpu{"cpu", 0};

  const std::uint64_t file_bytes = static_cast<std::uint64_t>(flags.integer("file-mib", 2048)) << 20;
  const std::int64_t length = flags.integer("length", 1024);
  const std::int64_t steps = flags.integer("steps", 200);
  const int repeats = static_cast<int>(flags.integer("repeats", 7));

  TokenFile file{fmt::format("/tmp/backplane-bench-tokens-{}.bin", ::getpid())};
  if (!write_tokens(file.path, file_bytes)) {
    fmt::print(stderr, "cannot write {}\n", file.path);
    return 1;
  }
  const int descriptor = ::open(file.path.c_str(), O_RDONLY);
  void* mapping = ::mmap(nullptr, file_bytes, PROT_READ, MAP_PRIVATE | MAP_POPULATE, descriptor, 0);
  ::close(descriptor);
  if (mapping == MAP_FAILED) {
    fmt::print(stderr, "cannot map {}\n", file.path);
    return 1;
  }
  std::shared_ptr<const void> owner(mapping,
                                    [file_bytes](const void* data) { ::munmap(const_cast<void*>(data), file_bytes); });
  const auto token_count = static_cast<std::int64_t>(file_bytes / 2);
  Array tokens = Array::wrap_host(runtime, cpu, DType::kU16, {token_count}, mapping, owner);
  const auto* base = static_cast<const std::uint16_t*>(mapping);

  fmt::print(
      "take_windows from a {} MiB memory-mapped uint16 token file onto cpu:0, T={}, {} steps per run, "
      "medians of {} alternating runs\n",
      file_bytes >> 20, length, steps, repeats);
  std::vector<std::pair<std::int64_t, double>> ours_i64;
  for (const std::int64_t batch : flags.integers("batches", {32, 256})) {
    std::mt19937_64 engine(static_cast<std::uint64_t>(batch));
    std::uniform_int_distribution<std::int64_t> pick(0, token_count - length);
    std::vector<std::int64_t> offsets(static_cast<std::size_t>(batch * steps));
    for (auto& offset : offsets) offset = pick(engine);
    const auto rows = static_cast<std::size_t>(batch);
    const auto row = static_cast<std::size_t>(length);

    std::vector<std::uint16_t> out16(rows * row);
    std::vector<std::int64_t> out64(rows * row);
    auto gather_u16 = [&] {
      for (std::int64_t step = 0; step < steps; ++step) {
        const std::int64_t* at = offsets.data() + step * batch;
        for (std::size_t index = 0; index < rows; ++index) {
          std::memcpy(out16.data() + index * row, base + at[index], row * 2);
        }
        bench::keep(out16[0]);
      }
    };
    auto gather_i64 = [&] {
      for (std::int64_t step = 0; step < steps; ++step) {
        const std::int64_t* at = offsets.data() + step * batch;
        for (std::size_t index = 0; index < rows; ++index) {
          const std::uint16_t* in = base + at[index];
          std::int64_t* destination = out64.data() + index * row;
          for (std::size_t position = 0; position < row; ++position) destination[position] = in[position];
        }
        bench::keep(out64[0]);
      }
    };
    auto ours = [&](std::optional<DType> output) {
      return [&, output] {
        for (std::int64_t step = 0; step < steps; ++step) {
          Array windows = take_windows(
              runtime, tokens, std::span<const std::int64_t>(offsets.data() + step * batch, rows), length, cpu, output);
          bench::keep(windows.host_data());
        }
      };
    };
    for (const bool widen : {false, true}) {
      auto baseline = widen ? std::function<void()>(gather_i64) : std::function<void()>(gather_u16);
      auto mine = ours(widen ? std::optional<DType>(DType::kI64) : std::nullopt);
      baseline();  // warm-up: page tables, caches, the allocator's blocks
      mine();
      const auto [baseline_seconds, our_seconds] = bench::paired_medians(repeats, baseline, mine);
      const double batch_bytes = static_cast<double>(batch * length * (widen ? 8 : 2));
      fmt::print(
          "  B={:4} {:3}: take_windows {:9.1f} batches/s ({:5.2f} GB/s)   hand-written loop {:9.1f} batches/s   "
          "ratio {:.2f} (goal >= 0.9)\n",
          batch, widen ? "I64" : "U16", steps / our_seconds, batch_bytes * steps / our_seconds / 1e9,
          steps / baseline_seconds, baseline_seconds / our_seconds);
      if (widen) ours_i64.emplace_back(batch, steps / our_seconds);
    }

    // Memory speed: each output row as one memcpy of its 8-byte-per-token
    // size from the same mapping (offsets clamped so the 4x longer reads fit).
    const auto last_wide = static_cast<std::int64_t>(file_bytes / 2) - 4 * length;
    auto copy_i64 = [&] {
      for (std::int64_t step = 0; step < steps; ++step) {
        const std::int64_t* at = offsets.data() + step * batch;
        for (std::size_t index = 0; index < rows; ++index) {
          std::memcpy(out64.data() + index * row, base + std::min(at[index], last_wide), row * 8);
        }
        bench::keep(out64[0]);
      }
    };
    auto widened = ours(DType::kI64);
    copy_i64();
    const auto [copy_seconds, widen_seconds] = bench::paired_medians(repeats, copy_i64, widened);
    fmt::print(
        "  B={:4} I64: take_windows {:9.1f} batches/s ({:5.1f} us/batch)   memcpy of the output bytes {:9.1f} "
        "batches/s ({:5.1f} us)   ratio {:.2f} (1.0 = memory speed)\n",
        batch, steps / widen_seconds, widen_seconds / steps * 1e6, steps / copy_seconds, copy_seconds / steps * 1e6,
        copy_seconds / widen_seconds);
  }

  const auto python = flags.text("python");
  const auto script = flags.text("script");
  if (python && script) {
    fmt::print("nanoGPT get_batch in Python (np.memmap, torch.stack of slices, .astype(int64)) on the same file:\n");
    for (const auto& [batch, our_rate] : ours_i64) {
      const std::string output = run_python(*python, *script, file.path, batch, length, steps, repeats);
      fmt::print("  {}", output);
      const auto marker = output.find("batches/s: ");
      if (marker != std::string::npos) {
        const double their_rate = std::strtod(output.c_str() + marker + 11, nullptr);
        if (their_rate > 0) {
          fmt::print("  B={:4}: take_windows (I64) is {:.1f}x the nanoGPT way ({:.1f} vs {:.1f} batches/s)\n", batch,
                     our_rate / their_rate, our_rate, their_rate);
        }
      }
    }
  }
  return 0;
}
