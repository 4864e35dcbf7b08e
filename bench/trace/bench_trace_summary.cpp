// `backplane trace summary` on generated traces of growing size: its peak
// resident memory against the file's size and against the tool on a tiny
// trace, and its time against reading the file's bytes once (the baseline,
// measured in the same run on the same, cached, file).
//
//   bench_trace_summary TOOL [MEGABYTES ...]     (default 50 100 200)
//
// The traces are what the recorder writes for a training loop: transfers,
// allocations and batch stream steps, one event a line. Expected: the peak
// stays that of the tiny trace whatever the size (the reader streams), and
// the time grows linearly.
#include "../bench_util.hpp"

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using backplane::bench::Clock;

// A trace of about `megabytes` MB, as the recorder lays it out.
void write_trace(const std::filesystem::path& path, double megabytes) {
  std::FILE* file = std::fopen(path.c_str(), "w");
  if (file == nullptr) throw std::runtime_error("cannot write " + path.string());
  std::fputs(
      "{\"traceEvents\":[\n{\"name\":\"process_name\",\"cat\":\"__metadata\",\"ph\":\"M\",\"ts\":0,\"pid\":1,"
      "\"tid\":0,\"args\":{\"name\":\"backplane: bench (1)\"}}",
      file);
  const auto target = static_cast<long>(megabytes * 1e6);
  long written = 0;
  for (long step = 0; written < target; ++step) {
    const double at = static_cast<double>(step) * 1000.0;
    written += std::fprintf(file,
                            ",\n{\"name\":\"batch\",\"cat\":\"host_to_device\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":84.221,"
                            "\"pid\":1,\"tid\":7,\"args\":{\"bytes\":2129920,\"route\":\"async\",\"source\":\"host\","
                            "\"target\":\"cuda:0\",\"device\":\"cuda:0\",\"gbps\":25.29}}",
                            at);
    written +=
        std::fprintf(file,
                     ",\n{\"name\":\"allocate\",\"cat\":\"allocation\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":3.5,"
                     "\"pid\":1,\"tid\":3,\"args\":{\"bytes\":2129920,\"device\":\"cuda:0\",\"memory\":\"device\"}}",
                     at + 1);
    written +=
        std::fprintf(file,
                     ",\n{\"name\":\"gather\",\"cat\":\"batch_stream\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":120.5,"
                     "\"pid\":1,\"tid\":3,\"args\":{\"stream\":1,\"step\":%ld,\"windows\":32,\"bytes\":2129920}}",
                     at + 2, step);
    written += std::fprintf(file,
                            ",\n{\"name\":\"step\",\"cat\":\"batch_stream\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":1000,"
                            "\"pid\":1,\"tid\":1,\"args\":{\"stream\":1,\"step\":%ld}}",
                            at, step);
    written += std::fprintf(file,
                            ",\n{\"name\":\"wait\",\"cat\":\"batch_stream\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":12.5,"
                            "\"pid\":1,\"tid\":1,\"args\":{\"stream\":1,\"step\":%ld}}",
                            at, step);
  }
  std::fputs(
      "\n],\n\"displayTimeUnit\":\"ms\",\n\"otherData\":{\"producer\":\"bench\",\"dropped_events\":0,"
      "\"capacity\":1048576}}\n",
      file);
  if (std::fclose(file) != 0) throw std::runtime_error("cannot write " + path.string());
}

// Reads the file's bytes once: the least any reader of it pays.
void read_bytes(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) throw std::runtime_error("cannot read " + path.string());
  std::vector<char> block(1 << 20);
  std::uint64_t sum = 0;
  for (ssize_t got = 0; (got = ::read(fd, block.data(), block.size())) > 0;)
    sum += static_cast<unsigned char>(block[0]);
  ::close(fd);
  backplane::bench::keep(sum);
}

struct Run {
  double seconds = 0;
  long peak_bytes = 0;
};

Run summarise(const std::string& tool, const std::filesystem::path& path) {
  const auto start = Clock::now();
  const pid_t child = ::fork();
  if (child < 0) throw std::runtime_error("fork failed");
  if (child == 0) {
    const int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, 1);
    ::execl(tool.c_str(), tool.c_str(), "trace", "summary", path.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  struct rusage usage {};
  ::wait4(child, &status, 0, &usage);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw std::runtime_error("trace summary failed on " + path.string());
  return {std::chrono::duration<double>(Clock::now() - start).count(), usage.ru_maxrss * 1024};
}

// The median time and the largest peak of three runs.
Run measure(const std::string& tool, const std::filesystem::path& path) {
  std::vector<Run> runs;
  for (int repeat = 0; repeat < 3; ++repeat) runs.push_back(summarise(tool, path));
  std::sort(runs.begin(), runs.end(), [](const Run& a, const Run& b) { return a.seconds < b.seconds; });
  Run result = runs[1];
  for (const Run& run : runs) result.peak_bytes = std::max(result.peak_bytes, run.peak_bytes);
  return result;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_trace_summary TOOL [MEGABYTES ...]\n");
    return 2;
  }
  const std::string tool = argv[1];
  std::vector<double> sizes;
  for (int index = 2; index < argc; ++index) sizes.push_back(std::atof(argv[index]));
  if (sizes.empty()) sizes = {50, 100, 200};
  char pattern[] = "/tmp/bench-trace-summary-XXXXXX";
  if (::mkdtemp(pattern) == nullptr) return 1;
  const std::filesystem::path directory(pattern);
  try {
    const auto tiny = directory / "tiny.json";
    write_trace(tiny, 0.01);
    const Run floor = measure(tool, tiny);
    fmt::print("trace summary of a {:.2f} MB trace: {:.1f} MB peak resident (the tool's floor)\n\n",
               static_cast<double>(std::filesystem::file_size(tiny)) / 1e6,
               static_cast<double>(floor.peak_bytes) / 1e6);
    fmt::print("{:>9} {:>10} {:>9} {:>11} {:>11} {:>10} {:>12} {:>12}\n", "file (MB)", "time (s)", "MB/s", "read (s)",
               "time/read", "peak (MB)", "peak/file", "peak/floor");
    for (const double megabytes : sizes) {
      const auto path = directory / fmt::format("trace-{}.json", megabytes);
      write_trace(path, megabytes);
      const double size = static_cast<double>(std::filesystem::file_size(path));
      read_bytes(path);  // cached, as for the tool's runs
      const double read = backplane::bench::median_seconds(3, [&] { read_bytes(path); });
      const Run run = measure(tool, path);
      fmt::print("{:>9.1f} {:>10.3f} {:>9.1f} {:>11.4f} {:>11.1f} {:>10.1f} {:>12.3f} {:>12.2f}\n", size / 1e6,
                 run.seconds, size / 1e6 / run.seconds, read, run.seconds / read,
                 static_cast<double>(run.peak_bytes) / 1e6, static_cast<double>(run.peak_bytes) / size,
                 static_cast<double>(run.peak_bytes) / static_cast<double>(floor.peak_bytes));
      std::filesystem::remove(path);
    }
  } catch (const std::exception& error) {
    std::fprintf(stderr, "bench_trace_summary: %s\n", error.what());
    std::filesystem::remove_all(directory);
    return 1;
  }
  std::filesystem::remove_all(directory);
  return 0;
}
