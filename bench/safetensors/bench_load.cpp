// safetensors::load, each against a baseline measured in the same run:
//
//   1. CPU load of a big token file (2 GiB) and a small one (20 MiB) against
//      reading only the 8-byte length + JSON header of the same file (goal:
//      within 2x, so the cost is O(header), not O(file)). The big file is
//      sparse (ftruncate): a CPU load never reads the data, and the sparse
//      file costs no disk.
//   2. Streamed load onto the simulated accelerator against a plain read()
//      of the whole file into (pre-faulted) memory (goal: ratio >= 0.8). The
//      file is written for real and read once before timing (warm cache).
//
//   bench_safetensors_load PLUGIN_DIR FIXTURE_DIR [--big-mib=2048] [--small-mib=20]
//       [--stream-mib=1024] [--repeats=7] [--dir=/tmp]
//   bench_safetensors_load PLUGIN_DIR --time-cpu-load=FILE [--repeats=7] [--touch]
//       prints the median seconds of a CPU load (with --touch: and of reading
//       every page of it), for bench_reference.py.
#include "../placement/placement_bench.hpp"

#include <backplane/safetensors.hpp>

#include <fmt/format.h>

#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <random>
#include <vector>

namespace {

using namespace backplane;
namespace st = backplane::safetensors;

Runtime::Options runtime_options(const std::vector<std::string>& plugin_dirs, std::uint64_t sim_memory) {
  Runtime::Options options = bench::isolated_options(plugin_dirs);
  options.backend_options["sim"] = {{"memory_limit", std::to_string(sim_memory)}};
  return options;
}

// A 1-D U16 `tokens` file of `bytes` bytes; sparse (no data written) or
// filled with random tokens.
std::filesystem::path token_file(const std::filesystem::path& path, std::uint64_t bytes, bool sparse) {
  const std::string json =
      fmt::format(R"({{"tokens":{{"dtype":"U16","shape":[{}],"data_offsets":[0,{}]}}}})", bytes / 2, bytes / 2 * 2);
  const std::string header = json + std::string((8 - json.size() % 8) % 8, ' ');
  std::string prefix(8, '\0');
  for (int index = 0; index < 8; ++index)
    prefix[static_cast<std::size_t>(index)] = static_cast<char>(header.size() >> (8 * index));
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << prefix << header;
  if (!sparse) {
    std::vector<std::uint16_t> chunk(std::size_t{1} << 22);
    std::mt19937 random(3);
    for (auto& token : chunk) token = static_cast<std::uint16_t>(random() % 50257);
    for (std::uint64_t written = 0; written < bytes / 2 * 2;) {
      const std::uint64_t n = std::min<std::uint64_t>(chunk.size() * 2, bytes / 2 * 2 - written);
      out.write(reinterpret_cast<const char*>(chunk.data()), static_cast<std::streamsize>(n));
      written += n;
    }
  }
  out.close();
  if (sparse) std::filesystem::resize_file(path, 8 + header.size() + bytes / 2 * 2);
  return path;
}

double median(std::vector<double> samples) {
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

// The floor: open, read the 8-byte length and the JSON, close. No parsing.
void read_header_bytes(const std::filesystem::path& path, std::vector<char>& buffer) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  std::uint64_t length = 0;
  if (fd < 0 || ::pread(fd, &length, 8, 0) != 8) std::abort();
  buffer.resize(static_cast<std::size_t>(length));
  if (::pread(fd, buffer.data(), buffer.size(), 8) != static_cast<ssize_t>(buffer.size())) std::abort();
  ::close(fd);
}

void bench_cpu_load(Runtime& runtime, const std::filesystem::path& dir, std::int64_t big_mib, std::int64_t small_mib,
                    int repeats) {
  fmt::print("1. CPU load against reading only the header (8 bytes + JSON); medians of {} interleaved runs\n",
             repeats * 20);
  for (const std::int64_t mib : {big_mib, small_mib}) {
    const auto path =
        token_file(dir / fmt::format("bench-cpu-{}mib.safetensors", mib), static_cast<std::uint64_t>(mib) << 20, true);
    std::vector<char> buffer;
    auto header_only = [&] {
      read_header_bytes(path, buffer);
      bench::keep(buffer[0]);
    };
    auto parse_only = [&] { bench::keep(st::read_header(path).tensors.size()); };
    // Timed apart: load (open -> arrays), and dropping the arrays (munmap),
    // which a program pays later, when it is done with the data.
    std::optional<st::Loaded> loaded;
    auto load = [&] {
      loaded = st::load(runtime, path, Device{"cpu", 0});
      bench::keep(loaded->tensors.at("tokens").host_data());
    };
    auto drop = [&] { loaded.reset(); };
    for (int warm = 0; warm < 3; ++warm) {
      header_only();
      load();
      drop();
    }
    std::vector<double> floor_samples, parse_samples, load_samples, drop_samples;
    for (int repeat = 0; repeat < repeats * 20; ++repeat) {
      floor_samples.push_back(bench::median_seconds(1, header_only));
      parse_samples.push_back(bench::median_seconds(1, parse_only));
      load_samples.push_back(bench::median_seconds(1, load));
      drop_samples.push_back(bench::median_seconds(1, drop));
    }
    const double floor_seconds = median(floor_samples);
    const double load_seconds = median(load_samples);
    const double drop_seconds = median(drop_samples);
    fmt::print(
        "  {:5} MiB file: load {:5.1f} us + drop {:4.1f} us   header bytes {:4.1f} us   "
        "ratio load {:.2f}, load+drop {:.2f} (goal <= 2)   [read_header with parsing {:4.1f} us]\n",
        mib, load_seconds * 1e6, drop_seconds * 1e6, floor_seconds * 1e6, load_seconds / floor_seconds,
        (load_seconds + drop_seconds) / floor_seconds, median(parse_samples) * 1e6);
    std::filesystem::remove(path);
  }
}

void bench_streamed_load(Runtime& runtime, const std::filesystem::path& dir, std::int64_t mib, int repeats) {
  const std::uint64_t bytes = static_cast<std::uint64_t>(mib) << 20;
  fmt::print(
      "2. streamed load onto sim:0 against read() of the file into memory ({} MiB, warm page cache; "
      "medians of {} alternating runs)\n",
      mib, repeats);
  const auto path = token_file(dir / "bench-stream.safetensors", bytes, false);
  const auto file_size = std::filesystem::file_size(path);
  std::unique_ptr<char[]> memory(new char[file_size]);
  std::memset(memory.get(), 1, file_size);  // pre-faulted, like the device's cached blocks after a warm-up
  auto read_all = [&] {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    std::uint64_t done = 0;
    while (done < file_size) {
      const ssize_t got = ::read(fd, memory.get() + done, file_size - done);
      if (got <= 0) std::abort();
      done += static_cast<std::uint64_t>(got);
    }
    ::close(fd);
    bench::keep(memory[file_size - 1]);
  };
  std::uint64_t reports = 0;
  st::LoadOptions options;
  options.progress = [&](std::uint64_t, std::uint64_t) { ++reports; };
  auto load = [&] {
    st::Loaded loaded = st::load(runtime, path, Device{"sim", 0}, options);
    bench::keep(loaded.tensors.size());
  };
  read_all();
  load();
  const auto [read_seconds, load_seconds] = bench::paired_medians(repeats, read_all, load);
  const double gb = static_cast<double>(file_size) / 1e9;
  fmt::print(
      "  load {:8.1f} ms ({:5.2f} GB/s)   read() {:8.1f} ms ({:5.2f} GB/s)   ratio {:.2f} (goal >= 0.8); "
      "{} progress reports per load\n",
      load_seconds * 1e3, gb / load_seconds, read_seconds * 1e3, gb / read_seconds, read_seconds / load_seconds,
      reports / static_cast<std::uint64_t>(repeats + 1));
  std::filesystem::remove(path);
}

int time_cpu_load(Runtime& runtime, const std::filesystem::path& path, int repeats, bool touch) {
  auto load = [&] {
    st::Loaded loaded = st::load(runtime, path, Device{"cpu", 0});
    bench::keep(loaded.tensors.size());
  };
  load();
  fmt::print("{{\"load\": {}", bench::median_seconds(repeats, load));
  if (touch) {
    // Load and read every page: what a user pays when all of it is used.
    auto load_and_read = [&] {
      st::Loaded loaded = st::load(runtime, path, Device{"cpu", 0});
      std::uint64_t sum = 0;
      for (const auto& [name, array] : loaded.tensors) {
        const auto* bytes = static_cast<const unsigned char*>(array.host_data());
        for (std::uint64_t index = 0; index < array.nbytes(); index += 4096) sum += bytes[index];
      }
      bench::keep(sum);
    };
    fmt::print(", \"load_and_touch\": {}", bench::median_seconds(repeats, load_and_read));
  }
  fmt::print("}}\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const bench::Flags flags(argc, argv);
  const auto positional = flags.positional();
  const int repeats = static_cast<int>(flags.integer("repeats", 7));
  if (const auto file = flags.text("time-cpu-load"); file && positional.size() == 1) {
    Runtime runtime(runtime_options(positional, 0));
    bool touch = false;
    for (int index = 1; index < argc; ++index) touch = touch || std::string_view(argv[index]) == "--touch";
    return time_cpu_load(runtime, *file, repeats, touch);
  }
  if (positional.size() != 2) {
    fmt::print(stderr,
               "usage: bench_safetensors_load PLUGIN_DIR FIXTURE_DIR [--big-mib=2048] [--small-mib=20] "
               "[--stream-mib=1024] [--repeats=7] [--dir=/tmp]\n");
    return 2;
  }
  const std::int64_t stream_mib = flags.integer("stream-mib", 1024);
  Runtime runtime(runtime_options(positional, static_cast<std::uint64_t>(stream_mib + 64) << 20));
  const std::filesystem::path dir = flags.text("dir").value_or(std::filesystem::temp_directory_path().string());
  bench_cpu_load(runtime, dir, flags.integer("big-mib", 2048), flags.integer("small-mib", 20), repeats);
  bench_streamed_load(runtime, dir, stream_mib, repeats);
  return 0;
}
