// Document-aligned windows against plain ones, in the same run, on the same
// warm tokens (random U16, a BOS every ~1,000 tokens on average):
//   1. the producer's draw: ns per window of windows(step) with documents
//      (the keyed permutation over document starts, then the start's lookup)
//      against without (goal: at most 2x);
//   2. the pieces: ns per window of laying out cu_seqlens and filling
//      position_ids, the producer's other new work;
//   3. a training loop with a fixed fake step (busy wait): data_stall_fraction
//      with and without documents, at each batch size.
//
//   bench_documents PLUGIN_DIR [--mib=256] [--batches=32,256] [--context=1024]
//       [--steps=100] [--compute-ms=5]
#include "../placement/placement_bench.hpp"

#include <backplane/array.hpp>
#include <backplane/batch_stream.hpp>

#include <fmt/format.h>

#include <cstdio>
#include <random>
#include <vector>

namespace {

using namespace backplane;

constexpr std::uint16_t kBos = 0;

std::vector<std::uint16_t> tokens_with_documents(std::uint64_t count) {
  std::vector<std::uint16_t> tokens(count);
  std::mt19937_64 engine(11);
  std::uniform_int_distribution<int> token(1, 65535);
  std::uniform_int_distribution<int> opens(0, 999);
  for (auto& value : tokens) value = opens(engine) == 0 ? kBos : static_cast<std::uint16_t>(token(engine));
  tokens[0] = kBos;
  return tokens;
}

BatchStreamOptions stream_options(std::int64_t batch, std::int64_t context, bool documents) {
  BatchStreamOptions options;
  options.batch_size = batch;
  options.context = context;
  options.devices = {Device{"cpu", 1}};
  options.dtype = DType::kI64;
  options.seed = 3;
  if (documents) options.documents = DocumentBoundaries::bos(kBos);
  return options;
}

void draw_cost(Runtime& runtime, const Array& source, std::int64_t context) {
  constexpr std::int64_t kBatch = 256;
  constexpr std::int64_t kSteps = 2000;
  BatchStream plain(runtime, {source}, stream_options(kBatch, context, false));
  BatchStream aligned(runtime, {source}, stream_options(kBatch, context, true));
  const auto [without, with] = bench::paired_medians(
      5,
      [&] {
        for (std::int64_t step = 0; step < kSteps; ++step) bench::keep(plain.windows(step));
      },
      [&] {
        for (std::int64_t step = 0; step < kSteps; ++step) bench::keep(aligned.windows(step));
      });
  const double windows = static_cast<double>(kSteps * kBatch);
  fmt::print(
      "draw, B={} T={}: windows(step) without documents {:.1f} ns/window, with documents (BOS) {:.1f} ns/window "
      "({:.2f}x; goal <= 2x)\n",
      kBatch, context, without / windows * 1e9, with / windows * 1e9, with / without);
}

void loop(Runtime& runtime, const Array& source, std::int64_t batch, std::int64_t context, std::int64_t steps,
          double compute_ms) {
  double stall[2] = {0, 0};
  double per_step[2] = {0, 0};
  for (const bool documents : {false, true}) {
    BatchStream stream(runtime, {source}, stream_options(batch, context, documents));
    // Back to back first: the producer's time per step bounds this.
    const bench::Clock::time_point start = bench::Clock::now();
    for (std::int64_t step = 0; step < steps; ++step) bench::keep(stream.next_batch());
    per_step[documents] = std::chrono::duration<double>(bench::Clock::now() - start).count() / steps;
    BatchStream loop(runtime, {source}, stream_options(batch, context, documents));
    for (std::int64_t step = 0; step < steps; ++step) {
      bench::keep(loop.next_batch());
      const auto until = bench::Clock::now() + std::chrono::microseconds(static_cast<int>(compute_ms * 1000));
      while (bench::Clock::now() < until) {
      }
    }
    stall[documents] = loop.stats().data_stall_fraction;
  }
  fmt::print(
      "B={:<4} T={}: back to back {:.0f} us a step without documents, {:.0f} us with ({:.2f}x: the pieces' "
      "position_ids are a second pass over B x T); with a {:.0f} ms step data_stall_fraction {:.4f} without, "
      "{:.4f} with (goal <= 0.01)\n",
      batch, context, per_step[0] * 1e6, per_step[1] * 1e6, per_step[1] / per_step[0], compute_ms, stall[0], stall[1]);
}

}  // namespace

int main(int argc, char** argv) {
  const bench::Flags flags(argc, argv);
  const std::vector<std::string> positional = flags.positional();
  if (positional.empty()) {
    std::fprintf(stderr, "usage: bench_documents PLUGIN_DIR [--mib=256] ...\n");
    return 2;
  }
  Runtime::Options runtime_options = bench::isolated_options({positional[0]});
  runtime_options.backend_options["cpu"] = {{"devices", "2"}};
  Runtime runtime(runtime_options);
  const auto count = static_cast<std::uint64_t>(flags.integer("mib", 256)) << 19;  // U16 tokens
  const std::vector<std::uint16_t> tokens = tokens_with_documents(count);
  const Array source = Array::from_host(runtime, Device{"cpu", 0}, DType::kU16, {static_cast<std::int64_t>(count)},
                                        tokens.data(), count * 2);
  const std::int64_t context = flags.integer("context", 1024);
  draw_cost(runtime, source, context);
  for (const std::int64_t batch : flags.integers("batches", {32, 256})) {
    loop(runtime, source, batch, context, flags.integer("steps", 100),
         static_cast<double>(flags.integer("compute-ms", 5)));
  }
  return 0;
}
