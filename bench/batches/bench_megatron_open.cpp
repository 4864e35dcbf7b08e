// Opening a Megatron-Core indexed dataset and taking its first batch, warm,
// against the same tokens opened as a raw file (no index to read or check),
// both measured in this run:
//   - write PREFIX.bin (10^8 U16 tokens by default) and PREFIX.idx
//     (documents of 1-2,000 tokens, one sequence each, as
//     IndexedDatasetBuilder lays them out), then read both once so the pages
//     are warm;
//   - time load_tokens(PREFIX) + a BatchStream over it + its first batch
//     (B=32, T=1024), median of runs; and the same from PREFIX.bin as raw
//     U16 tokens.
// Prints both and the index's share (goal: <= 10 ms to the first batch).
//
//   bench_megatron_open PLUGIN_DIR [--tokens=100000000] [--dir=/var/tmp]
#include "../placement/placement_bench.hpp"

#include <backplane/batch_stream.hpp>
#include <backplane/tokens.hpp>

#include <fmt/format.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <vector>

namespace {

using namespace backplane;

template <class T>
void put(std::ofstream& out, T value) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));  // x86-64: little-endian, as the format is
  out.write(bytes, sizeof(T));
}

// A dataset of `count` U16 tokens in documents of 1-2,000 tokens. Returns
// the number of documents.
std::uint64_t write_dataset(const std::filesystem::path& prefix, std::uint64_t count) {
  std::mt19937_64 random(5);
  std::vector<std::int32_t> lengths;
  for (std::uint64_t left = count; left > 0;) {
    const auto length = std::min<std::uint64_t>(left, 1 + random() % 2000);
    lengths.push_back(static_cast<std::int32_t>(length));
    left -= length;
  }
  {
    std::ofstream data(prefix.string() + ".bin", std::ios::binary);
    std::vector<std::uint16_t> chunk(1 << 20);
    for (std::uint64_t done = 0; done < count; done += chunk.size()) {
      const std::uint64_t size = std::min<std::uint64_t>(chunk.size(), count - done);
      for (std::uint64_t index = 0; index < size; ++index) chunk[index] = static_cast<std::uint16_t>(random());
      data.write(reinterpret_cast<const char*>(chunk.data()), static_cast<std::streamsize>(size * 2));
    }
  }
  std::ofstream index(prefix.string() + ".idx", std::ios::binary);
  index.write("MMIDIDX\0\0", 9);
  put<std::uint64_t>(index, 1);
  put<std::uint8_t>(index, 8);  // uint16
  put<std::uint64_t>(index, lengths.size());
  put<std::uint64_t>(index, lengths.size() + 1);
  for (const std::int32_t length : lengths) put(index, length);
  std::int64_t pointer = 0;
  for (const std::int32_t length : lengths) {
    put(index, pointer);
    pointer += std::int64_t{length} * 2;
  }
  for (std::uint64_t document = 0; document <= lengths.size(); ++document) put<std::int64_t>(index, document);
  return lengths.size();
}

double first_batch_seconds(Runtime& runtime, const std::filesystem::path& path, const TokenFileOptions& load) {
  BatchStreamOptions options;
  options.batch_size = 32;
  options.context = 1024;
  options.devices = {Device{"cpu", 0}};
  options.seed = 7;
  return bench::median_seconds(7, [&] {
    BatchStream stream(runtime, {load_tokens(runtime, path, load)}, options);
    bench::keep(stream.next().front().host_data());
  });
}

}  // namespace

int main(int argc, char** argv) {
  const bench::Flags flags(argc, argv);
  const std::vector<std::string> positional = flags.positional();
  if (positional.empty()) {
    std::fprintf(stderr, "usage: bench_megatron_open PLUGIN_DIR [--tokens=100000000] [--dir=/var/tmp]\n");
    return 2;
  }
  Runtime runtime(bench::isolated_options({positional[0]}));
  const auto count = static_cast<std::uint64_t>(flags.integers("tokens", {100'000'000}).front());
  const std::filesystem::path directory =
      std::filesystem::path(flags.text("dir").value_or("/var/tmp")) / fmt::format("bench-megatron-{}", ::getpid());
  std::filesystem::create_directories(directory);
  const std::filesystem::path prefix = directory / "dataset";
  const std::uint64_t documents = write_dataset(prefix, count);
  TokenFileOptions raw;
  raw.dtype = DType::kU16;
  (void)first_batch_seconds(runtime, prefix.string() + ".bin", raw);  // the pages warm
  const double megatron = first_batch_seconds(runtime, prefix, {});
  const double plain = first_batch_seconds(runtime, prefix.string() + ".bin", raw);
  fmt::print(
      "Megatron dataset of {} U16 tokens in {} documents ({:.1f} MiB index): load + stream + first batch (B=32, "
      "T=1024) in {:.2f} ms, warm (goal <= 10 ms, {}); the same .bin as a raw file {:.2f} ms: a difference of "
      "{:+.2f} ms ({:.2f}x)\n",
      count, documents, static_cast<double>(std::filesystem::file_size(prefix.string() + ".idx")) / (1 << 20),
      megatron * 1e3, megatron <= 0.010 ? "met" : "NOT met", plain * 1e3, (megatron - plain) * 1e3, megatron / plain);
  std::filesystem::remove_all(directory);
  return 0;
}
