// Host<->device bandwidth ceilings measured with plain CUDA runtime calls:
//   pinned   cudaMemcpyAsync from/to cudaHostAlloc memory (the ceiling)
//   pageable cudaMemcpy from/to ordinary malloc'd memory
// for sizes 64 MiB .. 4 GiB (or --sizes-mib 64,256,...). Prints one row per
// measurement for bench/gpu/run to tabulate:
//   <method>\t<H2D|D2H>\t<bytes>\t<GB/s>      (GB = 1e9 bytes, median of runs)
// and '#' lines with context. Exit status 77 when there is no CUDA device.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;

bool ok(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return true;
  std::fprintf(stderr, "bench_transfer: %s failed: %s: %s\n", what, cudaGetErrorName(error), cudaGetErrorString(error));
  return false;
}

std::vector<std::size_t> parse_sizes(int argc, char** argv) {
  std::vector<std::size_t> sizes = {64 * kMiB, 256 * kMiB, 1024 * kMiB, 4096 * kMiB};
  for (int index = 1; index + 1 < argc; ++index) {
    if (std::strcmp(argv[index], "--sizes-mib") != 0) continue;
    sizes.clear();
    std::string list = argv[index + 1];
    for (std::size_t start = 0; start <= list.size();) {
      const std::size_t comma = std::min(list.find(',', start), list.size());
      sizes.push_back(std::stoull(list.substr(start, comma - start)) * kMiB);
      start = comma + 1;
    }
  }
  return sizes;
}

int repetitions_for(std::size_t bytes) { return bytes >= 1024 * kMiB ? 3 : 7; }

// Median wall-clock seconds of `copy` (which must return only once the data
// has arrived), after one warm-up run.
template <class Copy>
double median_seconds(int repetitions, Copy&& copy) {
  if (!copy()) return -1;
  std::vector<double> seconds;
  for (int run = 0; run < repetitions; ++run) {
    const auto start = std::chrono::steady_clock::now();
    if (!copy()) return -1;
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(seconds.begin(), seconds.end());
  return seconds[seconds.size() / 2];
}

void row(const char* method, const char* direction, std::size_t bytes, double seconds) {
  if (seconds <= 0) {
    std::printf("%s\t%s\t%zu\tfailed\n", method, direction, bytes);
  } else {
    std::printf("%s\t%s\t%zu\t%.2f\n", method, direction, bytes, bytes / seconds / 1e9);
  }
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::size_t> sizes = parse_sizes(argc, argv);
  const std::size_t largest = *std::max_element(sizes.begin(), sizes.end());

  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("# skipped: no CUDA device\n");
    return 77;
  }
  cudaDeviceProp properties{};
  if (!ok(cudaGetDeviceProperties(&properties, 0), "cudaGetDeviceProperties")) return 1;
  int driver = 0;
  cudaDriverGetVersion(&driver);
  std::printf("# device: cuda:0 %s, PCI %04x:%02x:%02x, driver for CUDA %d.%d\n", properties.name,
              properties.pciDomainID, properties.pciBusID, properties.pciDeviceID, driver / 1000, (driver % 1000) / 10);

  void* device = nullptr;
  void* pinned = nullptr;
  if (!ok(cudaMalloc(&device, largest), "cudaMalloc") ||
      !ok(cudaHostAlloc(&pinned, largest, cudaHostAllocDefault), "cudaHostAlloc")) {
    return 1;
  }
  // Pageable memory, touched first so page faults are not measured.
  auto* pageable = static_cast<unsigned char*>(std::malloc(largest));
  if (pageable == nullptr) {
    std::fprintf(stderr, "bench_transfer: malloc of %zu bytes failed\n", largest);
    return 1;
  }
  std::memset(pageable, 1, largest);
  std::memset(pinned, 2, largest);
  cudaStream_t stream = nullptr;
  if (!ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate")) return 1;

  for (const std::size_t bytes : sizes) {
    const int repetitions = repetitions_for(bytes);
    row("pinned cudaMemcpyAsync", "H2D", bytes, median_seconds(repetitions, [&] {
          return ok(cudaMemcpyAsync(device, pinned, bytes, cudaMemcpyHostToDevice, stream), "cudaMemcpyAsync H2D") &&
                 ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
        }));
    row("pageable cudaMemcpy", "H2D", bytes, median_seconds(repetitions, [&] {
          return ok(cudaMemcpy(device, pageable, bytes, cudaMemcpyHostToDevice), "cudaMemcpy H2D");
        }));
    row("pinned cudaMemcpyAsync", "D2H", bytes, median_seconds(repetitions, [&] {
          return ok(cudaMemcpyAsync(pinned, device, bytes, cudaMemcpyDeviceToHost, stream), "cudaMemcpyAsync D2H") &&
                 ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
        }));
    row("pageable cudaMemcpy", "D2H", bytes, median_seconds(repetitions, [&] {
          return ok(cudaMemcpy(pageable, device, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
        }));
  }
  cudaStreamDestroy(stream);
  std::free(pageable);
  cudaFreeHost(pinned);
  cudaFree(device);
  return 0;
}
