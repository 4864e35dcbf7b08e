// Making a batch stream over many token files, against what it cost when
// every source read /proc/self/maps again (the release rule's check), both
// measured in this run:
//   - the stream: load N small raw token files (not timed), then time making
//     a stream over all of them (and its first batch);
//   - the old cost: one read of /proc/self/maps per source, each read seeing
//     the N mappings, timed for a few reads and scaled to N.
// Prints the time per 1,000 sources for each N (goal: <= 0.1 s per 1,000)
// and the ratio to the old cost.
//
//   bench_many_sources PLUGIN_DIR [--sources=1000,8000] [--dir=/tmp]
#include "../placement/placement_bench.hpp"
#include "util/page_advice.hpp"

#include <backplane/batch_stream.hpp>
#include <backplane/tokens.hpp>

#include <fmt/format.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <vector>

namespace {

using namespace backplane;
using bench::Clock;

double since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

void measure(Runtime& runtime, const std::filesystem::path& directory, std::int64_t count) {
  std::vector<std::uint16_t> tokens(2048);
  for (std::size_t index = 0; index < tokens.size(); ++index) tokens[index] = static_cast<std::uint16_t>(index);
  TokenFileOptions raw;
  raw.dtype = DType::kU16;
  std::vector<Array> sources;
  for (std::int64_t index = 0; index < count; ++index) {
    const std::filesystem::path path = directory / fmt::format("shard_{:05}.u16", index);
    std::ofstream(path, std::ios::binary)
        .write(reinterpret_cast<const char*>(tokens.data()), static_cast<std::streamsize>(tokens.size() * 2));
    sources.push_back(load_tokens(runtime, path, raw));
    std::filesystem::remove(path);  // the mapping keeps the tokens
  }
  BatchStreamOptions options;
  options.batch_size = 16;
  options.context = 255;
  options.devices = {Device{"cpu", 1}};
  options.seed = 3;
  const double made = bench::median_seconds(3, [&] {
    BatchStream stream(runtime, sources, options);
    (void)stream.next();
  });
  // What each source cost before: a read of the mappings, which now list N files.
  constexpr int kReads = 10;
  const Clock::time_point start = Clock::now();
  std::size_t seen = 0;
  for (int read = 0; read < kReads; ++read) seen += detail::MemoryMappings::of_this_process().count();
  bench::keep(seen);
  const double per_read = since(start) / kReads;
  const double before = made + per_read * static_cast<double>(count);
  const double per_thousand = made / static_cast<double>(count) * 1000;
  fmt::print(
      "{} sources: a stream made (and its first batch) in {:.4f} s, {:.4f} s per 1,000 sources (goal <= 0.1, {}); "
      "one /proc/self/maps read per source, as before, would add {} x {:.3f} ms = {:.2f} s ({:.0f}x)\n",
      count, made, per_thousand, per_thousand <= 0.1 ? "met" : "NOT met", count, per_read * 1e3,
      per_read * static_cast<double>(count), before / made);
}

}  // namespace

int main(int argc, char** argv) {
  const bench::Flags flags(argc, argv);
  const std::vector<std::string> positional = flags.positional();
  if (positional.empty()) {
    std::fprintf(stderr, "usage: bench_many_sources PLUGIN_DIR [--sources=1000,8000] [--dir=/tmp]\n");
    return 2;
  }
  Runtime::Options runtime_options = bench::isolated_options({positional[0]});
  runtime_options.backend_options["cpu"] = {{"devices", "2"}};
  Runtime runtime(runtime_options);
  const std::filesystem::path directory =
      std::filesystem::path(flags.text("dir").value_or("/tmp")) / fmt::format("bench-many-sources-{}", ::getpid());
  std::filesystem::create_directories(directory);
  for (const std::int64_t count : flags.integers("sources", {1000, 8000})) measure(runtime, directory, count);
  std::filesystem::remove_all(directory);
  return 0;
}
