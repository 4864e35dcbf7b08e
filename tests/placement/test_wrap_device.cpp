// Array::wrap_device: arrays over device memory someone else owns (what a
// DLPack import of CUDA memory becomes), on the simulated accelerator, the
// CPU backend, and a plugin built against ABI 1.0 that cannot adopt memory.
#include "support/placement_fixture.hpp"

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <thread>

namespace backplane::testing {
namespace {

// Stands for the foreign tensor: records when the array lets go of it.
struct Owner {
  explicit Owner(std::atomic<bool>& released) : released(released) {}
  ~Owner() { released = true; }
  std::atomic<bool>& released;
};

std::vector<std::uint8_t> slice_of(const std::vector<std::uint8_t>& bytes, std::size_t begin, std::size_t count) {
  return {bytes.begin() + static_cast<std::ptrdiff_t>(begin),
          bytes.begin() + static_cast<std::ptrdiff_t>(begin + count)};
}

void* offset_address(const Array& array, std::size_t offset) {
  return static_cast<std::byte*>(array.native_address()) + offset;
}

}  // namespace

TEST_CASE("[placement] wrap_device adopts device memory without a copy and releases its owner last") {
  Runtime runtime(placement_options());
  const auto bytes = random_bytes(4096);
  Array home = u8_array(runtime, kSim0, bytes);
  const auto allocations = memory_stats(runtime, kSim0).backend_allocations;
  std::atomic<bool> released{false};

  Array wrapped = Array::wrap_device(runtime, kSim0, DType::kU8, {1000}, offset_address(home, 96),
                                     std::make_shared<Owner>(released));
  CHECK(wrapped.device() == kSim0);
  CHECK(wrapped.native_address() == offset_address(home, 96));
  CHECK(wrapped.host_data() == nullptr);
  CHECK(wrapped.to_vector<std::uint8_t>() == slice_of(bytes, 96, 1000));
  CHECK(memory_stats(runtime, kSim0).backend_allocations == allocations);  // nothing allocated

  CHECK(device_put(runtime, wrapped, kSim0).same_as(wrapped));
  Array on_cpu = device_put(runtime, wrapped, kCpu0);
  Array on_sim1 = device_put(runtime, wrapped, kSim1);
  Array rows = wrapped.slice(10, 20);
  CHECK(on_cpu.to_vector<std::uint8_t>() == slice_of(bytes, 96, 1000));
  CHECK(on_sim1.to_vector<std::uint8_t>() == slice_of(bytes, 96, 1000));
  CHECK(rows.to_vector<std::uint8_t>() == slice_of(bytes, 106, 10));

  wrapped = Array();
  CHECK_FALSE(released);  // the view still uses the memory
  rows = Array();
  CHECK(released);
  CHECK(home.to_vector<std::uint8_t>() == bytes);  // the memory itself was not freed
}

TEST_CASE("[placement] a wrapped array's owner outlives a transfer still reading it") {
  Runtime runtime(placement_options({{"copy_delay_us", "150000"}}));
  const auto bytes = random_bytes(1 << 16);
  Array home = u8_array(runtime, kSim0, bytes);
  std::atomic<bool> released{false};
  Array moving;
  {
    Array wrapped = Array::wrap_device(runtime, kSim0, DType::kU8, {1 << 16}, home.native_address(),
                                       std::make_shared<Owner>(released));
    moving = device_put(runtime, wrapped, kSim1);
  }
  CHECK_FALSE(released);  // the copy (delayed 150 ms on the sim's worker) holds it
  CHECK(moving.to_vector<std::uint8_t>() == bytes);
  // The transfer drops its reference just after completing, on its thread.
  for (int wait = 0; wait < 500 && !released; ++wait) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK(released);
}

TEST_CASE("[placement] wrap_device on cpu shares host memory both ways") {
  Runtime runtime(placement_options());
  auto bytes = random_bytes(512);
  Array wrapped = Array::wrap_device(runtime, kCpu1, DType::kU16, {256}, bytes.data(), nullptr);
  CHECK(wrapped.host_data() == bytes.data());
  CHECK(wrapped.native_address() == bytes.data());
  Array on_sim = device_put(runtime, wrapped, kSim0);
  std::vector<std::uint8_t> back(512);
  on_sim.copy_to_host(back.data(), back.size());
  CHECK(back == bytes);
  bytes[0] = static_cast<std::uint8_t>(bytes[0] + 1);
  CHECK(std::memcmp(wrapped.host_data(), bytes.data(), 1) == 0);
}

TEST_CASE("[placement] wrap_device refuses memory the backend does not recognise, naming it") {
  Runtime runtime(placement_options());
  Array home = u8_array(runtime, kSim0, random_bytes(4096));
  std::atomic<bool> released{false};

  const Error other_device = error_from([&] {
    Array::wrap_device(runtime, kSim1, DType::kU8, {64}, home.native_address(), std::make_shared<Owner>(released));
  });
  CHECK(other_device.code() == ErrorCode::kInvalidArgument);
  CHECK(contains(other_device.what(), "sim:1: memory_wrap of 64 bytes at 0x"));
  CHECK(contains(other_device.what(), "the address is memory of sim:0"));
  CHECK(released);  // a refused owner is dropped at once

  const Error past_end = error_from([&] {
    Array::wrap_device(runtime, kSim0, DType::kF32, {2, 8}, offset_address(home, 4064), nullptr);
  });
  CHECK(past_end.code() == ErrorCode::kOutOfRange);
  CHECK(contains(past_end.what(), "runs past the end of its 4.00 KiB allocation (it starts 4064 bytes in)"));

  const Error null_address = error_from([&] { Array::wrap_device(runtime, kSim0, DType::kU8, {1}, nullptr, nullptr); });
  CHECK(null_address.code() == ErrorCode::kInvalidArgument);
  CHECK(contains(null_address.what(), "Array::wrap_device: address is NULL for a non-empty array"));

  const Error unknown_device = error_from([&] {
    Array::wrap_device(runtime, Device{"sim", 7}, DType::kU8, {1}, home.native_address(), nullptr);
  });
  CHECK(unknown_device.code() == ErrorCode::kOutOfRange);
  CHECK(contains(unknown_device.what(), "sim:7"));
}

TEST_CASE("[placement] a 1.0 plugin still places arrays, and refuses wrap_device naming its ABI") {
  Runtime::Options options;
  options.plugin_paths = {BP_TEST_ABI_1_0_DIR};
  options.skip_default_paths = true;
  options.environment = std::map<std::string, std::string>{};
  Runtime runtime(options);
  REQUIRE(runtime.backends().size() == 1);
  CHECK(runtime.backends()[0].abi_version == "1.0");
  CHECK(runtime.backends()[0].status == BackendStatus::kAvailable);

  const auto bytes = random_bytes(300);
  Array array = u8_array(runtime, kCpu0, bytes);
  CHECK(array.to_vector<std::uint8_t>() == bytes);
  CHECK(device_put(runtime, array.slice(1, 300), kCpu0).to_vector<std::uint8_t>() == slice_of(bytes, 1, 299));

  auto data = random_bytes(16);
  const Error refused = error_from([&] { Array::wrap_device(runtime, kCpu0, DType::kU8, {16}, data.data(), nullptr); });
  CHECK(refused.code() == ErrorCode::kUnsupported);
  CHECK(std::string(refused.what()) ==
        "cpu:0: the backend cannot adopt memory it did not allocate (plugin ABI 1.0 has no memory_wrap; it "
        "arrived in ABI 1.1)");
  // wrap_host needs nothing from the plugin and still works.
  Array host = Array::wrap_host(runtime, kCpu0, DType::kU8, {16}, data.data(), nullptr);
  CHECK(host.to_vector<std::uint8_t>() == data);
  // Its table ends before dlpack_device_type (1.2): it reads as 0, whatever
  // lies past struct_size.
  CHECK(runtime.backends()[0].dlpack_device_type == 0);
  CHECK(host.dlpack_device_type() == 0);
}

TEST_CASE("[placement] a 1.1 plugin places arrays and adopts memory; its DLPack type and priority are 1.2's defaults") {
  Runtime::Options options;
  options.plugin_paths = {BP_TEST_ABI_1_1_DIR};
  options.skip_default_paths = true;
  options.environment = std::map<std::string, std::string>{};
  Runtime runtime(options);
  REQUIRE(runtime.backends().size() == 1);
  const BackendInfo& info = runtime.backends()[0];
  CHECK(info.abi_version == "1.1");
  CHECK(info.status == BackendStatus::kAvailable);
  CHECK(info.priority == 10);           // the table's: its probe does not know the field
  CHECK(info.dlpack_device_type == 0);  // past its struct_size

  const auto bytes = random_bytes(300);
  Array array = u8_array(runtime, kCpu0, bytes);
  CHECK(device_put(runtime, array.slice(1, 300), kCpu0).to_vector<std::uint8_t>() == slice_of(bytes, 1, 299));
  auto data = random_bytes(16);
  Array wrapped = Array::wrap_device(runtime, kCpu0, DType::kU8, {16}, data.data(), nullptr);
  CHECK(wrapped.to_vector<std::uint8_t>() == data);
  CHECK(wrapped.dlpack_device_type() == 0);
  CHECK(wrapped.host_data() == data.data());  // host memory: DLPack exports it as kDLCPU
}

}  // namespace backplane::testing
