// backplane's own rows for the GPU transfer table (bench/gpu/run): device_put
// onto cuda:0 from a pageable host array and from a memory-mapped file, and
// back, printed in bench_transfer's format so that run can show the ratio to
// the pinned cudaMemcpyAsync ceiling measured in the same run:
//   <method>\t<H2D|D2H>\t<bytes>\t<GB/s>      (GB = 1e9 bytes, median of runs)
// Usage: bench_device_put [--sizes-mib 64,256,1024,4096]. Exits 77 without a
// usable cuda backend.
#include "../bench_util.hpp"

#include <backplane/array.hpp>
#include <backplane/backplane.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace {

using namespace backplane;

std::vector<std::uint64_t> parse_sizes(int argc, char** argv) {
  std::vector<std::uint64_t> sizes = {64, 256, 1024, 4096};
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string_view(argv[i]) != "--sizes-mib") continue;
    sizes.clear();
    std::string list = argv[i + 1];
    for (std::size_t start = 0; start < list.size();) {
      std::size_t end = list.find(',', start);
      if (end == std::string::npos) end = list.size();
      sizes.push_back(std::strtoull(list.substr(start, end - start).c_str(), nullptr, 10));
      start = end + 1;
    }
  }
  for (auto& size : sizes) size <<= 20;
  return sizes;
}

// A file of `bytes` random-ish bytes, mapped read-only; unmapped and removed
// when the last user is gone.
std::shared_ptr<const void> mapped_file(std::uint64_t bytes) {
  char path[] = "/tmp/backplane-gpu-bench-XXXXXX";
  int fd = ::mkstemp(path);
  if (fd < 0) return nullptr;
  ::unlink(path);
  std::vector<std::byte> chunk(64 << 20);
  for (std::size_t i = 0; i < chunk.size(); ++i) chunk[i] = static_cast<std::byte>(i * 131 + 7);
  for (std::uint64_t written = 0; written < bytes;) {
    auto part = std::min<std::uint64_t>(chunk.size(), bytes - written);
    if (::write(fd, chunk.data(), part) != static_cast<ssize_t>(part)) {
      ::close(fd);
      return nullptr;
    }
    written += part;
  }
  void* data = ::mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (data == MAP_FAILED) return nullptr;
  return std::shared_ptr<const void>(data, [bytes](const void* p) { ::munmap(const_cast<void*>(p), bytes); });
}

void row(const char* method, const char* direction, std::uint64_t bytes, double seconds) {
  std::printf("%s\t%s\t%llu\t%.2f\n", method, direction, static_cast<unsigned long long>(bytes),
              static_cast<double>(bytes) / seconds / 1e9);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  Runtime& runtime = Runtime::process_default();
  if (!runtime.is_available("cuda")) {
    const BackendInfo* cuda = runtime.find_backend("cuda");
    std::printf("# skipped: backplane device_put: cuda %s\n",
                cuda == nullptr ? "is not installed" : ("unavailable: " + cuda->reason).c_str());
    return 77;
  }
  const Device gpu{"cuda", 0};
  const Device cpu{"cpu", 0};
  constexpr int kRepeats = 5;
  try {
    for (std::uint64_t bytes : parse_sizes(argc, argv)) {
      const std::vector<std::int64_t> shape = {static_cast<std::int64_t>(bytes)};
      // Pageable: ordinary heap memory, as a training script's host arrays are.
      auto pageable = std::shared_ptr<std::byte[]>(new std::byte[bytes]);
      std::memset(pageable.get(), 1, bytes);
      Array host = Array::wrap_host(runtime, cpu, DType::kU8, shape, pageable.get(), pageable);
      Array on_gpu;
      double up = bench::median_seconds(kRepeats, [&] {
        on_gpu = device_put(runtime, host, gpu);
        on_gpu.block_until_ready();
      });
      row("backplane device_put pageable", "H2D", bytes, up);
      double down = bench::median_seconds(kRepeats, [&] { device_put(runtime, on_gpu, cpu).block_until_ready(); });
      row("backplane device_put pageable", "D2H", bytes, down);
      on_gpu = Array();
      pageable.reset();
      host = Array();

      // Memory-mapped file (warm page cache): the safetensors CPU load's case.
      if (auto mapping = mapped_file(bytes)) {
        Array mapped = Array::wrap_host(runtime, cpu, DType::kU8, shape, mapping.get(), mapping);
        double from_map =
            bench::median_seconds(kRepeats, [&] { device_put(runtime, mapped, gpu).block_until_ready(); });
        row("backplane device_put mmap", "H2D", bytes, from_map);
      } else {
        std::printf("# backplane device_put mmap: could not create a %llu-byte file in /tmp\n",
                    static_cast<unsigned long long>(bytes));
      }
      empty_cache(runtime, gpu);
    }
  } catch (const Error& error) {
    std::fprintf(stderr, "bench_device_put: %s\n", error.what());
    return 1;
  }
  return 0;
}
