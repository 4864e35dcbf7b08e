// Host -> opencl:0 through the generic layers against plain OpenCL calls on
// the same device, measured in the same run:
//   device_put of a cpu array     vs  clEnqueueWriteBuffer of the same bytes
//   take_windows onto opencl:0    vs  a hand-written gather + clEnqueueWriteBuffer
// The ratio is baseline time / our time (goal >= 0.9).
//
//   bench_opencl PLUGIN_DIR [--sizes-mib=64,256,1024] [--repeats=5]
//                [--batch=64] [--context=1024] [--steps=200]
#include "../placement/placement_bench.hpp"
#include "opencl_loader.hpp"

#include <backplane/array.hpp>

#include <fmt/format.h>

#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

using namespace backplane;
namespace cl = backplane::opencl;

namespace {

// The baseline's own context and queue on the device backplane calls opencl:0.
struct Baseline {
  const cl::Api* api = nullptr;
  cl_context context = nullptr;
  cl_command_queue queue = nullptr;

  explicit Baseline(const std::string& device_name) {
    const cl::LoaderLoad& load = cl::load_loader(cl::kLoaderLibrary);
    if (load.api == nullptr) throw std::runtime_error(load.failure);
    api = load.api;
    cl_uint count = 0;
    cl::check(api->clGetPlatformIDs(0, nullptr, &count), "clGetPlatformIDs");
    std::vector<cl_platform_id> platforms(count);
    cl::check(api->clGetPlatformIDs(count, platforms.data(), nullptr), "clGetPlatformIDs");
    for (cl_platform_id platform : platforms) {
      cl_uint devices = 0;
      if (api->clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 0, nullptr, &devices) != CL_SUCCESS) continue;
      std::vector<cl_device_id> ids(devices);
      api->clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, devices, ids.data(), nullptr);
      for (cl_device_id id : ids) {
        char name[512] = {};
        api->clGetDeviceInfo(id, CL_DEVICE_NAME, sizeof(name) - 1, name, nullptr);
        if (device_name != name) continue;
        cl_int result = CL_SUCCESS;
        context = api->clCreateContext(nullptr, 1, &id, nullptr, nullptr, &result);
        cl::check(result, "clCreateContext");
        queue = api->clCreateCommandQueue(context, id, 0, &result);
        cl::check(result, "clCreateCommandQueue");
        return;
      }
    }
    throw std::runtime_error("no OpenCL device named " + device_name);
  }

  cl_mem buffer(std::size_t size) const {
    cl_int result = CL_SUCCESS;
    cl_mem memory = api->clCreateBuffer(context, CL_MEM_READ_WRITE, size, nullptr, &result);
    cl::check(result, "clCreateBuffer");
    return memory;
  }

  void write(cl_mem memory, const void* source, std::size_t size) const {
    cl_event event = nullptr;
    cl::check(api->clEnqueueWriteBuffer(queue, memory, CL_FALSE, 0, size, source, 0, nullptr, &event),
              "clEnqueueWriteBuffer");
    api->clFlush(queue);
    cl::check(api->clWaitForEvents(1, &event), "clWaitForEvents");
    api->clReleaseEvent(event);
  }
};

}  // namespace

int main(int argc, char** argv) try {
  const bench::Flags flags(argc, argv);
  const auto positional = flags.positional();
  if (positional.size() != 1) {
    fmt::print(stderr,
               "usage: bench_opencl PLUGIN_DIR [--sizes-mib=64,256,1024] [--repeats=5] [--batch=64] "
               "[--context=1024] [--steps=200]\n");
    return 2;
  }
  Runtime::Options options = bench::isolated_options({positional[0]});
  Runtime runtime(options);
  const Device cpu{"cpu", 0};
  const Device device{"opencl", 0};
  const auto devices = runtime.devices("opencl");
  if (devices.empty()) {
    for (const auto& backend : runtime.backends()) {
      if (backend.name == "opencl")
        fmt::print("skipped: opencl is {}: {}\n", to_string(backend.status), backend.reason);
    }
    return 77;
  }
  const Baseline baseline(devices[0].name);
  const int repeats = static_cast<int>(flags.integer("repeats", 5));
  fmt::print("opencl:0 is {} ({})\n", devices[0].name,
             devices[0].attributes.empty() ? "" : devices[0].attributes[1].second);

  fmt::print(
      "device_put cpu:0 -> opencl:0 against clEnqueueWriteBuffer of the same bytes "
      "(medians of {} alternating runs after a warm-up)\n",
      repeats);
  for (const std::int64_t mib : flags.integers("sizes-mib", {64, 256, 1024})) {
    const auto size = static_cast<std::size_t>(mib) << 20;
    Array source;
    {
      std::vector<std::uint8_t> bytes(size);
      for (std::size_t index = 0; index < size; index += 4096)
        bytes[index] = static_cast<std::uint8_t>(index >> 12 | 1);
      source = Array::from_host(runtime, cpu, DType::kU8, {static_cast<std::int64_t>(size)}, bytes.data(), size);
    }
    cl_mem target = baseline.buffer(size);
    const void* from = source.host_data();
    auto run_write = [&] { baseline.write(target, from, size); };
    auto run_put = [&] {
      Array moved = device_put(runtime, source, device);
      moved.block_until_ready();
    };
    run_write();
    run_put();
    const auto [write_seconds, put_seconds] = bench::paired_medians(repeats, run_write, run_put);
    const double gb = static_cast<double>(size) / 1e9;
    fmt::print(
        "  {:5} MiB: device_put {:8.2f} ms ({:6.2f} GB/s)   clEnqueueWriteBuffer {:8.2f} ms ({:6.2f} GB/s)   "
        "ratio {:.2f} (goal >= 0.9)\n",
        mib, put_seconds * 1e3, gb / put_seconds, write_seconds * 1e3, gb / write_seconds, write_seconds / put_seconds);
    baseline.api->clReleaseMemObject(target);
    empty_cache(runtime, device);
  }

  // take_windows: B windows of T+1 uint16 tokens from 64 Mi tokens in host memory.
  const std::int64_t batch = flags.integer("batch", 64);
  const std::int64_t length = flags.integer("context", 1024) + 1;
  const int steps = static_cast<int>(flags.integer("steps", 200));
  const std::size_t token_count = std::size_t{64} << 20;
  std::vector<std::uint16_t> tokens(token_count);
  for (std::size_t index = 0; index < token_count; ++index)
    tokens[index] = static_cast<std::uint16_t>(index * 2654435761u >> 16);
  Array token_array =
      Array::wrap_host(runtime, cpu, DType::kU16, {static_cast<std::int64_t>(token_count)}, tokens.data(), nullptr);
  std::mt19937_64 engine(5);
  std::uniform_int_distribution<std::int64_t> pick(0, static_cast<std::int64_t>(token_count) - length);
  std::vector<std::vector<std::int64_t>> offsets(static_cast<std::size_t>(steps));
  for (auto& step : offsets) {
    for (std::int64_t index = 0; index < batch; ++index) step.push_back(pick(engine));
  }
  const std::size_t batch_bytes = static_cast<std::size_t>(batch * length) * 2;
  std::vector<std::uint16_t> gathered(static_cast<std::size_t>(batch * length));
  cl_mem target = baseline.buffer(batch_bytes);
  auto run_gather = [&] {
    for (const auto& step : offsets) {
      for (std::size_t row = 0; row < step.size(); ++row) {
        std::memcpy(gathered.data() + row * static_cast<std::size_t>(length), tokens.data() + step[row],
                    static_cast<std::size_t>(length) * 2);
      }
      baseline.write(target, gathered.data(), batch_bytes);
    }
  };
  auto run_take = [&](DType output) {
    return [&, output] {
      for (const auto& step : offsets)
        take_windows(runtime, token_array, step, length, device, output).block_until_ready();
    };
  };
  run_gather();
  run_take(DType::kU16)();
  run_take(DType::kI64)();
  const auto [gather_seconds, take_seconds] = bench::paired_medians(repeats, run_gather, run_take(DType::kU16));
  const double widen_seconds = bench::median_seconds(repeats, run_take(DType::kI64));
  fmt::print(
      "take_windows of [{}, {}] uint16 onto opencl:0 against a hand-written gather + clEnqueueWriteBuffer "
      "({} steps, medians of {})\n",
      batch, length, steps, repeats);
  fmt::print("  take_windows {:8.1f} us/batch   gather + write {:8.1f} us/batch   ratio {:.2f} (goal >= 0.9)\n",
             take_seconds / steps * 1e6, gather_seconds / steps * 1e6, gather_seconds / take_seconds);
  fmt::print("  take_windows widening to int64 on the device: {:8.1f} us/batch\n", widen_seconds / steps * 1e6);
  baseline.api->clReleaseMemObject(target);
  return 0;
} catch (const std::exception& error) {
  fmt::print(stderr, "bench_opencl: {}\n", error.what());
  return 1;
}
