// The scan for BOS-marked document starts against memory speed, over a warm
// U16 token file mapped as load_tokens maps it:
//   - write 1 GiB (--mib) of U16 tokens with a BOS (50256) every 1-2,000
//     tokens, none of whose bytes is 0xFF, and read it once so its pages
//     are in the page cache and this process's mapping;
//   - the baseline: one thread's memchr for 0xFF over the same bytes, which
//     reads them all and finds nothing (memory speed for one core);
//   - scan_document_starts with the stream's default gather threads, with
//     one thread, and with one thread through the portable loop;
//   each a median of runs paired with the baseline. Prints GiB/s, the ratio
//   to memchr (goal: >= 0.8x) and the time a 20 GiB file would take.
//
//   bench_document_scan PLUGIN_DIR [--mib=1024] [--dir=/var/tmp] [--repeats=7]
#include "../placement/placement_bench.hpp"

#include "batches/document_scan.hpp"

#include <backplane/tokens.hpp>

#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>
#include <vector>

namespace {

using namespace backplane;

constexpr std::uint16_t kBos = 50256;  // 0xC450: neither byte is 0xFF

// Returns the number of BOS tokens written.
std::uint64_t write_tokens(const std::filesystem::path& path, std::uint64_t count) {
  std::mt19937_64 random(3);
  std::ofstream out(path, std::ios::binary);
  std::vector<std::uint16_t> chunk(1 << 20);
  std::uint64_t next_bos = 0;
  std::uint64_t markers = 0;
  for (std::uint64_t done = 0; done < count; done += chunk.size()) {
    const std::uint64_t size = std::min<std::uint64_t>(chunk.size(), count - done);
    for (std::uint64_t index = 0; index < size; ++index) {
      const std::uint64_t bits = random();
      // Bytes of 0-254 and 0-195: never 0xFF, never the BOS (high byte 0xC4).
      chunk[index] = static_cast<std::uint16_t>(((bits & 0xFF) % 255) | ((((bits >> 8) & 0xFF) % 196) << 8));
      if (done + index == next_bos) {
        chunk[index] = kBos;
        ++markers;
        next_bos += 1 + random() % 2000;
      }
    }
    out.write(reinterpret_cast<const char*>(chunk.data()), static_cast<std::streamsize>(size * 2));
  }
  return markers;
}

double gib_per_second(std::uint64_t bytes, double seconds) { return static_cast<double>(bytes) / seconds / (1 << 30); }

}  // namespace

int main(int argc, char** argv) {
  const bench::Flags flags(argc, argv);
  const std::vector<std::string> positional = flags.positional();
  if (positional.empty()) {
    std::fprintf(stderr, "usage: bench_document_scan PLUGIN_DIR [--mib=1024] [--dir=/var/tmp] [--repeats=7]\n");
    return 2;
  }
  Runtime runtime(bench::isolated_options({positional[0]}));
  const auto bytes = static_cast<std::uint64_t>(flags.integer("mib", 1024)) << 20;
  const int repeats = static_cast<int>(flags.integer("repeats", 7));
  const std::filesystem::path directory =
      std::filesystem::path(flags.text("dir").value_or("/var/tmp")) / fmt::format("bench-document-scan-{}", ::getpid());
  std::filesystem::create_directories(directory);
  const std::filesystem::path path = directory / "tokens.u16";
  const std::uint64_t markers = write_tokens(path, bytes / 2);

  TokenFileOptions raw;
  raw.dtype = DType::kU16;
  const Array tokens = load_tokens(runtime, path, raw);
  const auto* data = static_cast<const std::byte*>(tokens.host_data());
  const std::uint64_t count = tokens.element_count();
  const auto baseline = [&] { bench::keep(std::memchr(data, 0xFF, count * 2)); };
  baseline();  // the pages into the page cache and this mapping

  // The stream's gather threads when BatchStreamOptions::threads is 0.
  const unsigned default_threads = std::clamp(std::thread::hardware_concurrency(), 4U, 8U);
  bool correct = true;
  const auto measure = [&](unsigned threads, detail::ScanLoop loop) {
    detail::GatherPool pool(threads);
    const auto scan = [&] {
      const std::vector<std::int64_t> starts =
          detail::scan_document_starts(data, count, DType::kU16, kBos, detail::DocumentMarker::kBos, pool, {loop});
      correct = correct && starts.size() == markers;
      bench::keep(starts.data());
    };
    return bench::paired_medians(repeats, baseline, scan);
  };
  const double gib = static_cast<double>(count * 2) / (1 << 30);
  fmt::print("{:.2f} GiB of U16 tokens, {} BOS ({} tokens per document), warm; median of {} runs each:\n", gib, markers,
             count / markers, repeats);
  struct Row {
    const char* name;
    unsigned threads;
    detail::ScanLoop loop;
  };
  for (const Row& row : {Row{"scan, default threads", default_threads, detail::ScanLoop::kVector},
                         Row{"scan, 1 thread", 1, detail::ScanLoop::kVector},
                         Row{"scan, 1 thread, portable loop", 1, detail::ScanLoop::kPortable}}) {
    const auto [memchr_seconds, scan_seconds] = measure(row.threads, row.loop);
    fmt::print(
        "  {:<31} ({} threads): {:6.2f} GiB/s, memchr (1 thread) {:6.2f} GiB/s: {:.2f}x memchr (goal >= 0.8x, "
        "{}); 20 GiB in {:.2f} s\n",
        row.name, row.threads, gib_per_second(count * 2, scan_seconds), gib_per_second(count * 2, memchr_seconds),
        memchr_seconds / scan_seconds, memchr_seconds / scan_seconds >= 0.8 ? "met" : "NOT met",
        scan_seconds * 20 / gib);
  }
  std::filesystem::remove_all(directory);
  if (!correct) {
    fmt::print("the scan found a number of starts other than the {} BOS written\n", markers);
    return 1;
  }
  return 0;
}
