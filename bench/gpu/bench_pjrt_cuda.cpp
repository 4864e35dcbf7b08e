// The CUDA PJRT plugin's row for the GPU transfer table (bench/gpu/run),
// next to the native cuda plugin's, measured in the same run: device_put of
// a pageable host array onto cuda:0 and onto pjrt_xla_cuda:0 (the pjrt
// adapter over jax-cuda12-pjrt's xla_cuda_plugin.so), each staged through its backend's
// pinned memory, and back, in bench_transfer's format:
//   <method>\t<H2D|D2H>\t<bytes>\t<GB/s>      (GB = 1e9 bytes, median of runs)
// Usage: bench_pjrt_cuda [--sizes-mib 256]. The adapter is found next to the
// build (plugins/pjrt/), the PJRT library in BACKPLANE_PJRT_CUDA_LIBRARY or
// in the jax-cuda12-pjrt wheel of the python3 on PATH. That library is 487 MB
// and bench/gpu/pack cannot carry it: without it this prints why and exits 77.
#include "../bench_util.hpp"

#include <backplane/array.hpp>
#include <backplane/backplane.hpp>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace {

using namespace backplane;

std::vector<std::uint64_t> parse_sizes(int argc, char** argv) {
  std::vector<std::uint64_t> sizes = {256};
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string_view(argv[i]) != "--sizes-mib") continue;
    sizes.clear();
    const std::string list = argv[i + 1];
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

// The wheel's library: BACKPLANE_PJRT_CUDA_LIBRARY, else find_pjrt.py (from
// a pack or the source tree), else "".
std::string cuda_pjrt_library(const std::filesystem::path& build) {
  if (const char* named = std::getenv("BACKPLANE_PJRT_CUDA_LIBRARY"); named != nullptr && *named != '\0') return named;
  // A pack has the finder beside the adapter; a build tree, in the source tree above it.
  std::filesystem::path finder = build / "plugins" / "pjrt" / "find_pjrt.py";
  if (!std::filesystem::exists(finder)) finder = build.parent_path() / "plugins" / "pjrt" / "find_pjrt.py";
  if (!std::filesystem::exists(finder)) return "";
  const std::string command = "python3 '" + finder.string() + "' --library jax-cuda12-pjrt 2>/dev/null";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), pclose);
  char line[4096] = {};
  if (pipe == nullptr || std::fgets(line, sizeof(line), pipe.get()) == nullptr) return "";
  std::string path(line);
  while (!path.empty() && path.back() == '\n') path.pop_back();
  return path;
}

void row(const std::string& method, const char* direction, std::uint64_t bytes, double seconds) {
  std::printf("%s\t%s\t%llu\t%.2f\n", method.c_str(), direction, static_cast<unsigned long long>(bytes),
              static_cast<double>(bytes) / seconds / 1e9);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  // bench/gpu/bench_pjrt_cuda in a build tree, or one bench/gpu/pack made.
  const std::filesystem::path build =
      std::filesystem::canonical("/proc/self/exe").parent_path().parent_path().parent_path();
  const std::filesystem::path adapter = build / "plugins" / "pjrt" / "backplane-pjrt.so";
  if (!std::filesystem::exists(adapter)) {
    std::printf("# skipped: pjrt device_put rows: %s is not built\n", adapter.c_str());
    return 77;
  }
  const std::string library = cuda_pjrt_library(build);
  if (library.empty()) {
    std::printf(
        "# skipped: pjrt device_put rows: the CUDA PJRT plugin (jax-cuda12-pjrt's xla_cuda_plugin.so, 487 MB) is "
        "not on this machine; bench/gpu/pack cannot carry it (a copy holds 64 MiB at most): install the wheel here "
        "(pip install --no-deps jax-cuda12-pjrt==0.12.0.1) or set BACKPLANE_PJRT_CUDA_LIBRARY\n");
    return 77;
  }
  Runtime::Options options;
  options.plugin_paths = {adapter, build / "plugins" / "cuda" / "backplane-cuda.so",
                          build / "plugins" / "cpu" / "backplane-cpu.so"};
  options.skip_default_paths = true;
  options.ignore_environment = true;
  PluginSource source;  // the backend pjrt_xla_cuda
  source.name = "xla_cuda";
  source.path = library;
  options.sources = {source};
  Runtime runtime(options);
  const Device cpu{"cpu", 0};
  std::vector<std::pair<Device, std::string>> targets;
  for (const char* name : {"cuda", "pjrt_xla_cuda"}) {
    const BackendInfo* backend = runtime.find_backend(name);
    if (backend == nullptr || backend->status != BackendStatus::kAvailable) {
      std::printf("# skipped: %s device_put rows: %s\n", name,
                  backend == nullptr ? "not found"
                                     : (std::string(to_string(backend->status)) + ": " + backend->reason).c_str());
      continue;
    }
    targets.emplace_back(Device{name, 0}, std::string(name) == "cuda" ? "backplane device_put (cuda plugin)"
                                                                      : "backplane device_put (pjrt, xla_cuda_plugin)");
  }
  if (targets.empty()) return 77;
  constexpr int kRepeats = 5;
  try {
    for (std::uint64_t bytes : parse_sizes(argc, argv)) {
      auto pageable = std::shared_ptr<std::byte[]>(new std::byte[bytes]);
      std::memset(pageable.get(), 1, bytes);
      const Array host =
          Array::wrap_host(runtime, cpu, DType::kU8, {static_cast<std::int64_t>(bytes)}, pageable.get(), pageable);
      for (const auto& [device, method] : targets) {
        Array on_device;
        const double up = bench::median_seconds(kRepeats, [&] {
          on_device = device_put(runtime, host, device);
          on_device.block_until_ready();
        });
        row(method, "H2D", bytes, up);
        const double down =
            bench::median_seconds(kRepeats, [&] { device_put(runtime, on_device, cpu).block_until_ready(); });
        row(method, "D2H", bytes, down);
      }
    }
  } catch (const Error& error) {
    std::fprintf(stderr, "bench_pjrt_cuda: %s\n", error.what());
    return 1;
  }
  return 0;
}
