// The pjrt adapter over the PJRT wheels installed for the python3 on PATH,
// each figure against its baseline measured in the same run:
//   probe       the time of one probe (backend_create + probe: dlopen,
//               Plugin_Initialize, Client_Create, devices) of each installed
//               PJRT wheel, alone in a fresh process: the first run and the
//               median of the rest (the page cache warm);
//   discovery   a runtime that finds every installed PJRT wheel by entry
//               point (the site directories of python3 on PATH) and probes
//               each in a child process: the time to list its backends,
//               against the slowest single probe's whole process (goal
//               <= 1.5x, and <= 3 s);
//   device_put  256 MiB host -> a PJRT cpu device and back, on both data
//               paths, against memcpy of the same bytes between warm buffers
//               (goal >= 0.8x each way);
//   batches     a training loop with a 5 ms step onto a PJRT cpu device, on
//               both data paths, and onto cpu: data_stall_fraction (goal <= 1%).
//
//   bench_pjrt ADAPTER CPU_PLUGIN [--sizes-mib=256] [--repeats=5] [--compute-ms=5]
//   bench_pjrt --probe-once ADAPTER LIBRARY   (the child of the probe section)
//
// Exits 77 (skipped) without the xla-cpu-pjrt wheel.
#include "../bench_util.hpp"

#include <backplane/plugin.h>
#include <backplane/array.hpp>
#include <backplane/backplane.hpp>
#include <backplane/batch_stream.hpp>

#include <dlfcn.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace {

using namespace backplane;
using bench::Clock;

double since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// The library a PJRT wheel installed (plugins/pjrt/find_pjrt.py), or "".
std::string installed_library(const std::string& distribution) {
  const std::string command =
      "python3 '" BP_BENCH_SOURCE_DIR "/plugins/pjrt/find_pjrt.py' --library '" + distribution + "' 2>/dev/null";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), pclose);
  char line[4096] = {};
  if (pipe == nullptr || std::fgets(line, sizeof(line), pipe.get()) == nullptr) return "";
  std::string path(line);
  while (!path.empty() && path.back() == '\n') path.pop_back();
  return path;
}

// In a fresh process: backend_create + probe through the raw ABI; prints ms.
int probe_once(const char* adapter, const char* library) {
  void* handle = dlopen(adapter, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) return 1;
  auto entry = reinterpret_cast<BP_PluginEntryFn>(dlsym(handle, BP_PLUGIN_ENTRY_SYMBOL));
  const std::uint32_t majors[] = {BP_ABI_MAJOR};
  const BP_PluginEntryArgs offer{sizeof(offer), majors, 1, BP_ABI_MINOR};
  const BP_PluginApi* api = entry(&offer);
  const Clock::time_point start = Clock::now();
  const std::string key = "library";
  const BP_KeyValue option{sizeof(BP_KeyValue), key.data(), key.size(), library, std::strlen(library)};
  BP_BackendCreateArgs create{sizeof(create), &option, 1, nullptr};
  if (BP_Error* error = api->backend_create(&create)) {
    std::printf("failed %.*s\n", static_cast<int>(error->message_size), error->message);
    return 1;
  }
  BP_ProbeArgs probe{};
  probe.struct_size = sizeof(probe);
  probe.backend = create.backend;
  BP_Error* error = api->probe(&probe);
  const double seconds = since(start);
  std::printf("%.1f %s %.*s\n", seconds * 1e3,
              error != nullptr  ? "failed"
              : probe.available ? "available"
                                : "unavailable",
              static_cast<int>(probe.reason_size), probe.reason);
  std::fflush(stdout);
  std::_Exit(0);  // no client teardown in the figure, nor an unload the plugin does not survive
}

// The site directories of the python3 on PATH, as `backplane info` asks.
std::vector<std::filesystem::path> site_directories() {
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(
      popen("python3 -c \"import site; print('\\n'.join(site.getsitepackages()))\" 2>/dev/null", "r"), pclose);
  std::vector<std::filesystem::path> found;
  char line[4096] = {};
  while (pipe != nullptr && std::fgets(line, sizeof(line), pipe.get()) != nullptr) {
    std::string path(line);
    while (!path.empty() && path.back() == '\n') path.pop_back();
    if (!path.empty()) found.emplace_back(path);
  }
  return found;
}

// Discovery of every installed PJRT wheel in one runtime, its probes in
// child processes as PROBE_IN_CHILD asks, against `slowest_probe`: one
// probe's whole process, alone.
void discovery_section(const char* adapter, double slowest_probe) {
  const std::vector<std::filesystem::path> sites = site_directories();
  std::vector<double> runs;
  std::string listed;
  for (int run = 0; run < 5; ++run) {
    Runtime::Options options;
    options.plugin_paths = {adapter};
    options.skip_default_paths = true;
    options.environment = std::map<std::string, std::string>{};
    options.python_paths = sites;
    const Clock::time_point start = Clock::now();
    Runtime runtime(options);
    const std::vector<BackendInfo> backends = runtime.backends();
    runs.push_back(since(start));
    listed.clear();
    for (const BackendInfo& backend : backends) {
      listed += (listed.empty() ? "" : ", ") + backend.name + " " + std::string(to_string(backend.status));
    }
  }
  std::sort(runs.begin(), runs.end());
  const double median = runs[runs.size() / 2];
  fmt::print(
      "discovery of the installed PJRT wheels ({}): median {:.0f} ms of {} runs, slowest probe alone {:.0f} ms: "
      "{:.2f}x (goal <= 1.5x, <= 3 s)\n",
      listed, median * 1e3, runs.size(), slowest_probe * 1e3, median / slowest_probe);
}

// The slowest wheel's probe, whole process (warm median); 0 when none ran.
double probe_section(const char* self, const char* adapter) {
  double slowest = 0;
  for (const char* distribution : {"xla-cpu-pjrt", "jax-cuda12-pjrt"}) {
    const std::string library = installed_library(distribution);
    if (library.empty()) {
      fmt::print("probe {}: skipped, the wheel is not installed for python3\n", distribution);
      continue;
    }
    std::vector<double> probes;
    std::vector<double> processes;
    std::string verdict;
    for (int run = 0; run < 6; ++run) {
      const std::string command =
          std::string("'") + self + "' --probe-once '" + adapter + "' '" + library + "' 2>/dev/null";
      const Clock::time_point start = Clock::now();
      std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), pclose);
      char line[4096] = {};
      if (pipe == nullptr || std::fgets(line, sizeof(line), pipe.get()) == nullptr) break;
      pipe.reset();
      processes.push_back(since(start));
      probes.push_back(std::strtod(line, nullptr) / 1e3);
      verdict = line;
    }
    if (probes.size() < 2) {
      fmt::print("probe {}: the child did not answer\n", distribution);
      continue;
    }
    std::vector<double> warm(probes.begin() + 1, probes.end());
    std::vector<double> warm_processes(processes.begin() + 1, processes.end());
    std::sort(warm.begin(), warm.end());
    std::sort(warm_processes.begin(), warm_processes.end());
    while (!verdict.empty() && verdict.back() == '\n') verdict.pop_back();
    fmt::print("probe {}: first {:.0f} ms, then median {:.0f} ms (whole process {:.0f} ms) of {} runs: {}\n",
               distribution, probes[0] * 1e3, warm[warm.size() / 2] * 1e3,
               warm_processes[warm_processes.size() / 2] * 1e3, warm.size(), verdict.substr(verdict.find(' ') + 1));
    slowest = std::max(slowest, warm_processes[warm_processes.size() / 2]);
  }
  return slowest;
}

Runtime::Options pjrt_options(const char* adapter, const char* cpu_plugin, const std::string& library,
                              const std::string& data_path) {
  Runtime::Options options;
  options.plugin_paths = {adapter, cpu_plugin};
  options.skip_default_paths = true;
  options.environment = std::map<std::string, std::string>{};
  PluginSource source;  // the backend pjrt_xla_cpu
  source.name = "xla_cpu";
  source.path = library;
  source.create_options = {{"cpu_device_count", "int64:2"}};
  options.sources = {source};
  options.backend_options["pjrt_xla_cpu"] = {{"data_path", data_path}};
  options.backend_options["cpu"] = {{"devices", "2"}};
  return options;
}

// `target` is pjrt_xla_cpu:0, or cpu:1 for the cpu plugin's figure beside it (what
// the core itself costs on the way).
void device_put_section(Runtime& runtime, const Device& pjrt, const std::string& label, std::uint64_t bytes,
                        int repeats) {
  const Device cpu{"cpu", 0};
  std::vector<std::byte> source(bytes);
  std::vector<std::byte> target(bytes);
  for (std::uint64_t i = 0; i < bytes; i += 4096) source[i] = static_cast<std::byte>(i >> 12);
  std::memcpy(target.data(), source.data(), bytes);  // both warm
  auto owner = std::shared_ptr<const void>(source.data(), [](const void*) {});
  const Array host =
      Array::wrap_host(runtime, cpu, DType::kU8, {static_cast<std::int64_t>(bytes)}, source.data(), owner);
  Array on_pjrt = device_put(runtime, host, pjrt);
  on_pjrt.block_until_ready();
  std::vector<double> memcpy_up, ours_up, memcpy_down, ours_down;
  for (int repeat = 0; repeat < repeats; ++repeat) {
    memcpy_up.push_back(bench::median_seconds(1, [&] { std::memcpy(target.data(), source.data(), bytes); }));
    ours_up.push_back(bench::median_seconds(1, [&] {
      on_pjrt = device_put(runtime, host, pjrt);
      on_pjrt.block_until_ready();
    }));
    memcpy_down.push_back(bench::median_seconds(1, [&] { std::memcpy(source.data(), target.data(), bytes); }));
    ours_down.push_back(bench::median_seconds(1, [&] { device_put(runtime, on_pjrt, cpu).block_until_ready(); }));
  }
  const auto median = [](std::vector<double> values) {
    std::sort(values.begin(), values.end());
    return values[values.size() / 2];
  };
  const double gb = static_cast<double>(bytes) / 1e9;
  for (const auto& [direction, base, ours] : {std::tuple{"host->", median(memcpy_up), median(ours_up)},
                                              std::tuple{"->host", median(memcpy_down), median(ours_down)}}) {
    const std::string way =
        std::string_view(direction) == "host->" ? "host->" + pjrt.selector() : pjrt.selector() + "->host";
    fmt::print("device_put {} MiB {} ({}): {:.2f} GB/s, memcpy {:.2f} GB/s: {:.2f}x (median of {})\n", bytes >> 20, way,
               label, gb / ours, gb / base, base / ours, repeats);
  }
}

void batches_section(Runtime& runtime, const Device& device, const std::string& label, double compute_ms) {
  constexpr std::int64_t kTokens = std::int64_t{32} << 20;
  std::vector<std::uint16_t> tokens(static_cast<std::size_t>(kTokens));
  std::mt19937 engine(5);
  for (auto& token : tokens) token = static_cast<std::uint16_t>(engine());
  const Array source =
      Array::from_host(runtime, Device{"cpu", 0}, DType::kU16, {kTokens}, tokens.data(), tokens.size() * 2);
  BatchStreamOptions options;
  options.batch_size = 64;
  options.context = 1024;
  options.devices = {device};
  options.dtype = DType::kI64;
  BatchStream loop(runtime, {source}, options);
  for (int step = 0; step < 200; ++step) {
    bench::keep(loop.next());
    const Clock::time_point until = Clock::now() + std::chrono::microseconds(static_cast<int>(compute_ms * 1000));
    while (Clock::now() < until) {
    }
  }
  const BatchStreamStats stats = loop.stats();
  fmt::print("batches B=64 T=1024 U16->I64 onto {} with a {:.0f} ms step: data_stall_fraction {:.4f} ({} steps)\n",
             label, compute_ms, stats.data_stall_fraction, stats.steps);
}

std::int64_t flag(int argc, char** argv, std::string_view name, std::int64_t fallback) {
  const std::string prefix = "--" + std::string(name) + "=";
  for (int i = 3; i < argc; ++i) {
    if (std::string_view(argv[i]).substr(0, prefix.size()) == prefix)
      return std::strtoll(argv[i] + prefix.size(), nullptr, 10);
  }
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 4 && std::string_view(argv[1]) == "--probe-once") return probe_once(argv[2], argv[3]);
  if (argc < 3) {
    std::fprintf(stderr, "usage: bench_pjrt ADAPTER CPU_PLUGIN [--sizes-mib=256] [--repeats=5] [--compute-ms=5]\n");
    return 2;
  }
  const std::string library = installed_library("xla-cpu-pjrt");
  if (library.empty()) {
    std::printf("skipped: the xla-cpu-pjrt wheel is not installed for python3 (scripts/pip-test-packages)\n");
    return 77;
  }
  try {
    const double slowest_probe = probe_section(argv[0], argv[1]);
    if (slowest_probe > 0) discovery_section(argv[1], slowest_probe);
    const std::uint64_t bytes = static_cast<std::uint64_t>(flag(argc, argv, "sizes-mib", 256)) << 20;
    const int repeats = static_cast<int>(flag(argc, argv, "repeats", 5));
    const double compute_ms = static_cast<double>(flag(argc, argv, "compute-ms", 5));
    for (const std::string data_path : {"host", "copy"}) {
      Runtime runtime(pjrt_options(argv[1], argv[2], library, data_path));
      if (!runtime.is_available("pjrt_xla_cpu")) {
        const BackendInfo* backend = runtime.find_backend("pjrt_xla_cpu");
        std::printf("pjrt_xla_cpu is not available: %s\n", backend != nullptr ? backend->reason.c_str() : "not found");
        return 1;
      }
      device_put_section(runtime, Device{"pjrt_xla_cpu", 0}, "data path " + data_path, bytes, repeats);
      if (data_path == "host") device_put_section(runtime, Device{"cpu", 1}, "the cpu plugin", bytes, repeats);
      batches_section(runtime, Device{"pjrt_xla_cpu", 0}, "pjrt_xla_cpu:0 (data path " + data_path + ")", compute_ms);
      if (data_path == "host") batches_section(runtime, Device{"cpu", 1}, "cpu:1 (the baseline)", compute_ms);
    }
  } catch (const Error& error) {
    std::fprintf(stderr, "bench_pjrt: %s\n", error.what());
    return 1;
  }
  return 0;
}
