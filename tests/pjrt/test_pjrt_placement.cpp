// A PJRT device through the generic layers, on both data paths: device_put,
// take_windows, the batch stream, a streamed safetensors load, the C API and
// DLPack, each equal bit for bit to the same work on the cpu backend.
#include "pjrt_support.hpp"
#include "support/backend_named.hpp"
#include "support/load_fixture.hpp"
#include "support/temp_dir.hpp"

#include <backplane/backplane.h>
#include <dlpack/dlpack.h>
#include <backplane/array.hpp>
#include <backplane/batch_stream.hpp>
#include <backplane/safetensors.hpp>

#include <cstring>
#include <random>

using namespace backplane;
using namespace backplane::testing;
namespace st = backplane::safetensors;

namespace {

const Device kHostCpu{"cpu", 0};

std::vector<std::uint8_t> bytes_of(std::size_t size, std::uint32_t seed) {
  std::vector<std::uint8_t> bytes(size);
  std::mt19937 engine(seed);
  for (auto& value : bytes) value = static_cast<std::uint8_t>(1 + engine() % 255);
  return bytes;
}

std::vector<std::uint16_t> tokens_of(std::size_t count) {
  std::vector<std::uint16_t> tokens(count);
  std::mt19937 engine(11);
  for (auto& value : tokens) value = static_cast<std::uint16_t>(1 + engine() % 65535);
  return tokens;
}

// Every byte of an array, whatever its dtype.
std::vector<std::uint8_t> raw(const Array& array) {
  std::vector<std::uint8_t> bytes(array.nbytes());
  array.copy_to_host(bytes.data(), bytes.size());
  return bytes;
}

// Runs `body` once per data path on a runtime with two PJRT cpu devices.
template <class Body>
void on_each_data_path(Body&& body) {
  const std::string library = cpu_pjrt_library();
  if (library.empty()) return;
  for (const std::string path : {"host", "copy"}) {
    CAPTURE(path);
    Runtime runtime(pjrt_runtime_options(library, {{"create.cpu_device_count", "int64:2"}, {"data_path", path}}));
    REQUIRE_MESSAGE(runtime.is_available(kPjrtBackend), backend_named(runtime, kPjrtBackend).reason);
    body(runtime, path == "host");
  }
}

}  // namespace

TEST_CASE("[pjrt][placement] device_put round-trips cpu->pjrt->pjrt->cpu, bit for bit") {
  on_each_data_path([](Runtime& runtime, bool host_path) {
    for (const std::size_t size : {std::size_t{0}, std::size_t{4099}, std::size_t{20} << 20}) {
      CAPTURE(size);
      const auto bytes = bytes_of(size, static_cast<std::uint32_t>(size));
      const Array on_cpu = Array::from_host(runtime, kHostCpu, DType::kU8, {static_cast<std::int64_t>(size)},
                                            bytes.data(), bytes.size());
      const Array on_pjrt = device_put(runtime, on_cpu, pjrt_device(0));
      CHECK(on_pjrt.device() == pjrt_device(0));
      // The host path's memory is host memory the probe says so of (ABI 1.4),
      // and the core reads it itself; the copy path's has no address.
      if (size != 0) CHECK((on_pjrt.host_data() != nullptr) == host_path);
      const Array on_other = device_put(runtime, on_pjrt, pjrt_device(1));
      const Array back = device_put(runtime, on_other, kHostCpu);
      CHECK(back.to_vector<std::uint8_t>() == bytes);
      CHECK(on_pjrt.to_vector<std::uint8_t>() == bytes);
      const auto begin = static_cast<std::int64_t>(size / 3);
      const Array part = device_put(on_pjrt.slice(begin, begin + static_cast<std::int64_t>(size / 2)), pjrt_device(1));
      CHECK(part.to_vector<std::uint8_t>() ==
            std::vector<std::uint8_t>(bytes.begin() + static_cast<std::ptrdiff_t>(size / 3),
                                      bytes.begin() + static_cast<std::ptrdiff_t>(size / 3 + size / 2)));
    }
  });
}

TEST_CASE("[pjrt][placement] take_windows onto a PJRT device equals take_windows onto cpu") {
  on_each_data_path([](Runtime& runtime, bool) {
    const auto tokens = tokens_of(10000);
    const Array source = Array::from_host(runtime, kHostCpu, DType::kU16, {10000}, tokens.data(), tokens.size() * 2);
    const std::vector<std::int64_t> offsets = {0, 17, 9935, 4000, 17};
    for (const DType dtype : {DType::kU16, DType::kI64, DType::kI32}) {
      CAPTURE(dtype_name(dtype));
      const Array on_cpu = take_windows(runtime, source, offsets, 65, kHostCpu, dtype);
      const Array on_pjrt = take_windows(runtime, source, offsets, 65, pjrt_device(1), dtype);
      CHECK(on_pjrt.device() == pjrt_device(1));
      CHECK(on_pjrt.shape() == on_cpu.shape());
      CHECK(raw(on_pjrt) == raw(on_cpu));
    }
  });
}

TEST_CASE("[pjrt][placement] the batch stream onto a PJRT device hands out the cpu stream's batches") {
  on_each_data_path([](Runtime& runtime, bool) {
    const auto tokens = tokens_of(200000);
    const Array source = Array::from_host(runtime, kHostCpu, DType::kU16, {200000}, tokens.data(), tokens.size() * 2);
    BatchStreamOptions options;
    options.batch_size = 8;
    options.context = 128;
    options.seed = 5;
    options.dtype = DType::kI64;
    options.devices = {kHostCpu};
    BatchStream reference(runtime, {source}, options);
    options.devices = {pjrt_device(0), pjrt_device(1)};
    BatchStream onto_pjrt(runtime, {source}, options);
    for (int step = 0; step < 20; ++step) {
      CAPTURE(step);
      const std::vector<Array> expected = reference.next();
      const std::vector<Array> got = onto_pjrt.next();
      REQUIRE(got.size() == 2);
      CHECK(got[0].device() == pjrt_device(0));
      CHECK(got[1].device() == pjrt_device(1));
      std::vector<std::uint8_t> joined = raw(got[0]);
      const auto second = raw(got[1]);
      joined.insert(joined.end(), second.begin(), second.end());
      CHECK(joined == raw(expected[0]));
    }
  });
}

TEST_CASE("[pjrt][safetensors] a streamed load onto a PJRT device equals the load onto cpu") {
  on_each_data_path([](Runtime& runtime, bool) {
    TempDir directory;
    const auto big = bytes_of((9u << 20) + 5, 21);  // more than one 8 MiB staging chunk: written in parts
    const auto small = bytes_of(3, 22);
    const std::vector<st::HostTensor> tensors{{{"big", "U8", {big.size()}}, std::as_bytes(std::span(big))},
                                              {{"small", "U8", {small.size()}}, std::as_bytes(std::span(small))}};
    const auto path = write_bytes(directory, "model.safetensors", st::serialize(tensors, {}));
    const st::Loaded on_cpu = st::load(runtime, path, kHostCpu);
    const st::Loaded on_pjrt = st::load(runtime, path, pjrt_device(1));
    REQUIRE(on_pjrt.tensors.size() == 2);
    for (const char* name : {"big", "small"}) {
      CAPTURE(name);
      CHECK(on_pjrt.tensors.at(name).device() == pjrt_device(1));
      CHECK(raw(on_pjrt.tensors.at(name)) == raw(on_cpu.tensors.at(name)));
    }
  });
}

// DLPack shares host memory only: the host path's arrays export as kDLCPU
// (device 0, as DLPack spells all host memory), the copy path's are refused
// because their memory has no address. Through the C API, as DLPack is.
TEST_CASE("[pjrt][embedding] the C API puts and gathers onto PJRT devices; DLPack exports the host path") {
  const std::string library = cpu_pjrt_library();
  if (library.empty()) return;
  for (const std::string path : {"host", "copy"}) {
    CAPTURE(path);
    const PjrtOptions options = {{"create.cpu_device_count", "int64:2"}, {"data_path", path}};
    const bool host_path = path == "host";
    TempDir directory;
    bp_runtime* runtime = pjrt_c_runtime(directory.path(), library, options);
    bp_device cpu{};
    bp_device device{};
    REQUIRE(bp_device_resolve(runtime, "cpu:0", &cpu) == BP_OK);
    REQUIRE_MESSAGE(bp_device_resolve(runtime, "pjrt_test:1", &device) == BP_OK, bp_last_error());
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

    DLManagedTensor* tensor = nullptr;
    const bp_status status = bp_array_to_dlpack(put, &tensor);
    if (host_path) {
      REQUIRE_MESSAGE(status == BP_OK, bp_last_error());
      CHECK(tensor->dl_tensor.device.device_type == kDLCPU);
      CHECK(tensor->dl_tensor.device.device_id == 0);
      const auto* data = static_cast<const std::uint16_t*>(tensor->dl_tensor.data);
      CHECK(std::vector<std::uint16_t>(data, data + 4096) == tokens);
      tensor->deleter(tensor);
    } else {
      CHECK(status == BP_STATUS_UNSUPPORTED);
      CHECK(tensor == nullptr);
      CHECK(std::string(bp_last_error()).find("pjrt_test:1 cannot be exported") != std::string::npos);
    }
    bp_array_destroy(batch);
    bp_array_destroy(put);
    bp_array_destroy(host);
    bp_runtime_destroy(runtime);
  }
}
