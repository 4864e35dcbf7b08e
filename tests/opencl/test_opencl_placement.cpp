// opencl:0 through the generic layers: device_put, take_windows (with the
// widening on the device), the streamed safetensors load, the C API and
// DLPack, and the default-device rule. The core knows nothing of OpenCL; these
// are the cases the placement and safetensors suites run on the simulated
// accelerator, on a real runtime with its own memory. Where the machine has no
// OpenCL device each case says so and returns.
#include "support/load_fixture.hpp"
#include "support/temp_dir.hpp"
#include "support/trace_file.hpp"

#include <backplane/backplane.h>
#include <dlpack/dlpack.h>
#include <backplane/trace.hpp>

#include <doctest/doctest.h>

#include <cstring>

using namespace backplane;
using namespace backplane::testing;
namespace st = backplane::safetensors;

namespace {

const Device kOpencl0{"opencl", 0};

Runtime::Options opencl_options() {
  Runtime::Options options;
  options.plugin_paths = {BP_TEST_PLUGIN_DIR};
  options.skip_default_paths = true;
  options.environment = std::map<std::string, std::string>{};
  return options;
}

bool have_opencl(Runtime& runtime) {
  for (const BackendInfo& backend : runtime.backends()) {
    if (backend.name != "opencl") continue;
    if (backend.status == BackendStatus::kAvailable) return true;
    MESSAGE("skipped: opencl is " << to_string(backend.status) << ": " << backend.reason);
    return false;
  }
  MESSAGE("skipped: the opencl plugin was not built");
  return false;
}

std::vector<std::uint16_t> tokens_of(std::size_t count) {
  std::vector<std::uint16_t> tokens(count);
  std::mt19937 engine(11);
  std::uniform_int_distribution<int> token(1, 65535);
  for (auto& value : tokens) value = static_cast<std::uint16_t>(token(engine));
  return tokens;
}

// A C API runtime over the build's plugins only, as the embedding cases use.
bp_runtime* c_runtime_create() {
  bp_runtime_options options{};
  options.struct_size = sizeof(options);
  const char* paths[] = {BP_TEST_PLUGIN_DIR};
  options.plugin_paths = paths;
  options.plugin_path_count = 1;
  options.skip_default_paths = 1;
  options.ignore_environment = 1;
  bp_runtime* runtime = nullptr;
  REQUIRE(bp_runtime_create(&options, &runtime) == BP_OK);
  return runtime;
}

}  // namespace

TEST_CASE("[opencl][placement] device_put round-trips cpu->opencl, opencl->opencl and opencl->cpu") {
  Runtime runtime(opencl_options());
  if (!have_opencl(runtime)) return;
  // One small copy and one larger than a staging chunk. PoCL's device is a
  // CPU: its memory is host RAM, so the core copies straight from the source
  // and never stages through pinned memory (a second host copy).
  for (const std::size_t size : {std::size_t{4099}, std::size_t{20} << 20}) {
    CAPTURE(size);
    const auto bytes = random_bytes(size, static_cast<std::uint32_t>(size));
    Array on_cpu = u8_array(runtime, Device{"cpu", 0}, bytes);
    Array on_device = device_put(runtime, on_cpu, kOpencl0);
    CHECK(on_device.device() == kOpencl0);
    CHECK(on_device.host_data() == nullptr);  // not host-addressable
    Array again = device_put(on_device.slice(0, static_cast<std::int64_t>(size)), kOpencl0);
    Array copy = device_put(runtime, on_device, Device{"cpu", 0});
    CHECK(copy.to_vector<std::uint8_t>() == bytes);
    CHECK(on_device.to_vector<std::uint8_t>() == bytes);
    CHECK(again.to_vector<std::uint8_t>() == bytes);
  }
  CHECK(memory_stats(runtime, kOpencl0).pinned_backend_allocations == 0);
}

TEST_CASE("[opencl][trace] a trace of device_put carries the device's profiled times of each copy") {
  TempDir directory;
  const auto path = directory.path() / "out.json";
  const auto bytes = random_bytes(std::size_t{4} << 20, 13);
  {
    Runtime runtime(opencl_options());
    if (!have_opencl(runtime)) return;
    const Array on_cpu = u8_array(runtime, Device{"cpu", 0}, bytes);
    trace_start(path);
    for (int round = 0; round < 3; ++round) {
      const Array on_device = device_put(runtime, on_cpu, kOpencl0);
      // Ready first, so that the download is issued on this thread as one
      // asynchronous copy (one waiting for its source goes to a transfer
      // thread, which keeps host times).
      on_device.block_until_ready();
      CHECK(device_put(runtime, on_device, Device{"cpu", 0}).to_vector<std::uint8_t>() == bytes);
    }
    trace_stop();
  }
  const nlohmann::json file = read_json(path);
  check_no_overlap(file);
  // The offset of the device's profiling clock is measured by a marker
  // between two host clock readings, so it is right to within that bracket
  // (microseconds on an idle queue); 2 ms allows for a descheduled thread on
  // a loaded machine, and is still far below what an unconverted device
  // clock would give (its epoch is the driver's: seconds to years away).
  constexpr double kToleranceUs = 2000;
  CHECK(check_device_times(file, "host_to_device", "opencl:0", kToleranceUs) == 3);
  CHECK(check_device_times(file, "device_to_host", "opencl:0", kToleranceUs) == 3);
}

TEST_CASE("[opencl][placement] take_windows gathers onto opencl:0, widening U16 to I64 on the device") {
  Runtime runtime(opencl_options());
  if (!have_opencl(runtime)) return;
  const auto tokens = tokens_of(10000);
  Array source = Array::from_host(runtime, Device{"cpu", 0}, DType::kU16, {10000}, tokens.data(), tokens.size() * 2);
  const std::vector<std::int64_t> offsets = {0, 17, 9935, 4000, 17};
  std::vector<std::int64_t> expected;
  for (std::int64_t offset : offsets) {
    for (std::int64_t index = 0; index < 65; ++index) expected.push_back(tokens[offset + index]);
  }
  Array narrow = take_windows(runtime, source, offsets, 65, kOpencl0);
  CHECK(narrow.device() == kOpencl0);
  CHECK(narrow.shape() == std::vector<std::int64_t>{5, 65});
  const auto narrow_values = narrow.to_vector<std::uint16_t>();
  CHECK(std::vector<std::int64_t>(narrow_values.begin(), narrow_values.end()) == expected);
  Array wide = take_windows(runtime, source, offsets, 65, kOpencl0, DType::kI64);
  CHECK(wide.dtype() == DType::kI64);
  CHECK(wide.to_vector<std::int64_t>() == expected);
  Array wide32 = take_windows(runtime, source, offsets, 65, kOpencl0, DType::kI32);
  const auto values32 = wide32.to_vector<std::int32_t>();
  CHECK(std::vector<std::int64_t>(values32.begin(), values32.end()) == expected);
}

TEST_CASE("[opencl][safetensors] load onto opencl:0 streams every tensor with progress") {
  Runtime runtime(opencl_options());
  if (!have_opencl(runtime)) return;
  TempDir dir;
  const auto big = random_bytes((9u << 20) + 5, 21);  // more than one 8 MiB staging chunk
  const auto small = random_bytes(3, 22);
  const std::vector<st::HostTensor> tensors{{{"big", "U8", {big.size()}}, std::as_bytes(std::span(big))},
                                            {{"small", "U8", {small.size()}}, std::as_bytes(std::span(small))}};
  const auto path = write_bytes(dir, "model.safetensors", st::serialize(tensors, {}));
  std::vector<std::pair<std::uint64_t, std::uint64_t>> reports;
  st::LoadOptions options;
  options.progress = [&](std::uint64_t done, std::uint64_t total) { reports.emplace_back(done, total); };
  st::Loaded loaded = st::load(runtime, path, kOpencl0, options);
  REQUIRE(loaded.tensors.size() == 2);
  CHECK(loaded.tensors.at("big").device() == kOpencl0);
  CHECK(loaded.tensors.at("big").host_data() == nullptr);
  CHECK(loaded.tensors.at("big").to_vector<std::uint8_t>() == big);
  CHECK(loaded.tensors.at("small").to_vector<std::uint8_t>() == small);
  REQUIRE(reports.size() >= 2);
  CHECK(reports.back() == std::make_pair(std::uint64_t{big.size() + 3}, std::uint64_t{big.size() + 3}));
}

TEST_CASE("[opencl][placement] the default device stays cpu when every OpenCL device is a CPU") {
  Runtime runtime(opencl_options());
  if (!have_opencl(runtime)) return;
  bool cpu_only = true;
  for (const DeviceInfo& device : runtime.devices("opencl")) cpu_only = cpu_only && device.kind == DeviceKind::kCpu;
  int priority = 0;
  for (const BackendInfo& backend : runtime.backends()) {
    if (backend.name == "opencl") priority = backend.priority;
  }
  if (cpu_only) {
    CHECK(priority == 5);
    CHECK(runtime.default_device().device == Device{"cpu", 0});
  } else {
    // Needs a core that honours the priority the probe reports (ABI 1.2).
    CHECK(priority == 50);
    CHECK(runtime.default_device().device.backend != "cpu");
  }
}

TEST_CASE("[opencl][embedding] the C API puts, gathers and reads back on opencl:0") {
  bp_runtime* runtime = c_runtime_create();
  int32_t available = 0;
  REQUIRE(bp_backend_is_available(runtime, "opencl", &available) == BP_OK);
  if (available == 0) {
    MESSAGE("skipped: opencl is not available");
    bp_runtime_destroy(runtime);
    return;
  }
  bp_device cpu{};
  bp_device device{};
  REQUIRE(bp_device_resolve(runtime, "cpu:0", &cpu) == BP_OK);
  REQUIRE(bp_device_resolve(runtime, "opencl:0", &device) == BP_OK);
  const auto tokens = tokens_of(4096);
  const int64_t shape[] = {4096};
  bp_array* host = nullptr;
  REQUIRE(bp_array_create(runtime, &cpu, BP_DTYPE_U16, shape, 1, tokens.data(), tokens.size() * 2, &host) == BP_OK);
  bp_array* put = nullptr;
  REQUIRE(bp_array_device_put(runtime, host, &device, nullptr, nullptr, &put) == BP_OK);
  CHECK(bp_array_wait(put) == BP_OK);
  std::vector<std::uint16_t> back(4096);
  CHECK(bp_array_copy_to_host(put, back.data(), back.size() * 2) == BP_OK);
  CHECK(back == tokens);
  const int64_t offsets[] = {7, 1000};
  bp_array* batch = nullptr;
  REQUIRE(bp_take_windows(runtime, host, offsets, 2, 33, &device, BP_DTYPE_I64, &batch) == BP_OK);
  std::vector<std::int64_t> widened(66);
  CHECK(bp_array_copy_to_host(batch, widened.data(), widened.size() * 8) == BP_OK);
  CHECK(widened[0] == tokens[7]);
  CHECK(widened[65] == tokens[1032]);
  bp_array_destroy(batch);
  bp_array_destroy(put);
  bp_array_destroy(host);
  bp_runtime_destroy(runtime);
}

// An opencl buffer has no address (its cl_mem cannot cross the backend ABI):
// exporting it would hand a consumer a NULL data pointer, so it is refused,
// while the array still says which DLPack device it lives on.
TEST_CASE("[opencl][embedding] DLPack export of an opencl array is refused, naming why") {
  Runtime runtime(opencl_options());
  if (!have_opencl(runtime)) return;
  bp_runtime* c_runtime = c_runtime_create();
  bp_device device{};
  REQUIRE(bp_device_resolve(c_runtime, "opencl:0", &device) == BP_OK);
  const std::vector<std::uint8_t> bytes(256, 7);
  const int64_t shape[] = {256};
  bp_array* array = nullptr;
  REQUIRE(bp_array_create(c_runtime, &device, BP_DTYPE_U8, shape, 1, bytes.data(), bytes.size(), &array) == BP_OK);
  DLManagedTensor* tensor = nullptr;
  CHECK(bp_array_to_dlpack(array, &tensor) == BP_STATUS_UNSUPPORTED);
  CHECK(tensor == nullptr);
  const std::string error = bp_last_error();
  CHECK(error.find("opencl:0 cannot be exported") != std::string::npos);
  CHECK(error.find("no address") != std::string::npos);
  int32_t device_type = 0;
  int32_t device_id = -1;
  REQUIRE(bp_array_dlpack_device(array, &device_type, &device_id) == BP_OK);
  CHECK(device_type == kDLOpenCL);
  CHECK(device_id == 0);
  bp_array_destroy(array);
  bp_runtime_destroy(c_runtime);
}
