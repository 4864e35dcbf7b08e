// Array: factories, views, copy-out, zero-copy wrapping.
#include "support/placement_fixture.hpp"

#include <cstring>
#include <memory>

using namespace backplane;
using namespace backplane::testing;

TEST_CASE("[placement] from_host and to_vector round-trip random data on cpu and sim") {
  Runtime runtime(placement_options());
  const auto bytes = random_bytes(4096 * 4);
  for (const Device& device : {kCpu0, kCpu1, kSim0, kSim1}) {
    CAPTURE(device.selector());
    Array array = Array::from_host(runtime, device, DType::kU32, {64, 64}, bytes.data(), bytes.size());
    CHECK(array.device() == device);
    CHECK(array.dtype() == DType::kU32);
    CHECK(array.shape() == std::vector<std::int64_t>{64, 64});
    CHECK(array.element_count() == 4096);
    CHECK(array.nbytes() == bytes.size());
    CHECK(array.is_ready());
    const auto values = array.to_vector<std::uint32_t>();
    REQUIRE(values.size() == 4096);
    CHECK(std::memcmp(values.data(), bytes.data(), bytes.size()) == 0);
  }
}

TEST_CASE("[placement] host_data and native_address: host pointers on cpu, a device address on the sim") {
  Runtime runtime(placement_options());
  const auto bytes = random_bytes(256);
  Array on_cpu = u8_array(runtime, kCpu0, bytes);
  REQUIRE(on_cpu.host_data() != nullptr);
  CHECK(on_cpu.native_address() == on_cpu.host_data());
  CHECK(std::memcmp(on_cpu.host_data(), bytes.data(), bytes.size()) == 0);
  Array on_sim = u8_array(runtime, kSim0, bytes);
  CHECK(on_sim.host_data() == nullptr);
  CHECK(on_sim.native_address() != nullptr);  // a device address, not host data
}

TEST_CASE("[placement] from_host refuses a size that does not match the shape") {
  Runtime runtime(placement_options());
  const auto bytes = random_bytes(10);
  auto error = error_from([&] { Array::from_host(runtime, kCpu0, DType::kU16, {4}, bytes.data(), bytes.size()); });
  CHECK(error.code() == ErrorCode::kInvalidArgument);
  CHECK(contains(error.what(), "10 bytes"));
  CHECK(contains(error.what(), "needs 8 bytes"));
  error = error_from([&] { Array::from_host(runtime, kCpu0, DType::kU8, {-1}, bytes.data(), 0); });
  CHECK(contains(error.what(), "negative extent"));
  error = error_from([] { Array().nbytes(); });
  CHECK(error.code() == ErrorCode::kInvalidArgument);
}

TEST_CASE("[placement] slices are views on axis 0 that share the buffer") {
  Runtime runtime(placement_options());
  const auto bytes = random_bytes(10 * 6 * 2);
  Array matrix = Array::from_host(runtime, kCpu0, DType::kU16, {10, 6}, bytes.data(), bytes.size());
  Array rows = matrix.slice(3, 7);
  CHECK(rows.shape() == std::vector<std::int64_t>{4, 6});
  CHECK(rows.byte_offset() == 3 * 6 * 2);
  CHECK(rows.nbytes() == 4 * 6 * 2);
  CHECK(rows.shares_buffer_with(matrix));
  CHECK(static_cast<const std::uint8_t*>(rows.host_data()) ==
        static_cast<const std::uint8_t*>(matrix.host_data()) + 36);
  auto values = rows.to_vector<std::uint16_t>();
  CHECK(std::memcmp(values.data(), bytes.data() + 36, 48) == 0);
  Array inner = rows.slice(1, 2);  // a view of a view
  CHECK(inner.byte_offset() == 4 * 6 * 2);
  CHECK(matrix.slice(10, 10).nbytes() == 0);

  auto error = error_from([&] { matrix.slice(5, 11); });
  CHECK(error.code() == ErrorCode::kOutOfRange);
  CHECK(contains(error.what(), "<= 10"));
}

TEST_CASE("[placement] sub-byte arrays slice only at whole bytes") {
  Runtime runtime(placement_options());
  const auto bytes = random_bytes(3);  // five F4 values in ceil(20/8) = 3 bytes
  Array packed = Array::from_host(runtime, kCpu0, DType::kF4, {5}, bytes.data(), bytes.size());
  CHECK(packed.nbytes() == 3);
  CHECK(packed.slice(2, 5).nbytes() == 2);
  CHECK(packed.slice(2, 4).nbytes() == 1);
  auto error = error_from([&] { packed.slice(1, 5); });
  CHECK(error.code() == ErrorCode::kInvalidArgument);
  CHECK(contains(error.what(), "whole byte"));
  CHECK(error_from([&] { packed.to_vector<std::uint8_t>(); }).code() == ErrorCode::kInvalidArgument);
}

TEST_CASE("[placement] wrap_host is zero-copy and keeps its owner alive") {
  Runtime runtime(placement_options());
  auto owner = std::make_shared<std::vector<std::uint8_t>>(random_bytes(1 << 16));
  std::weak_ptr<std::vector<std::uint8_t>> watch = owner;
  const std::uint8_t* data = owner->data();
  Array wrapped = Array::wrap_host(runtime, kCpu0, DType::kU8, {1 << 16}, data, owner);
  owner.reset();
  CHECK_FALSE(watch.expired());
  CHECK(wrapped.host_data() == data);
  CHECK(wrapped.native_address() == data);

  Array view = wrapped.slice(100, 200);
  Array on_sim = device_put(runtime, wrapped, kSim0);
  wrapped = Array();
  CHECK_FALSE(watch.expired());  // the view still uses it
  on_sim.block_until_ready();
  view = Array();
  on_sim = Array();
  CHECK(watch.expired());

  auto error = error_from([&] { Array::wrap_host(runtime, kSim0, DType::kU8, {4}, data, nullptr); });
  CHECK(error.code() == ErrorCode::kUnsupported);
  CHECK(contains(error.what(), "sim:0 is not host-addressable"));
}

TEST_CASE("[placement] arrays outlive their runtime; device_put then needs one") {
  Array array;
  {
    Runtime runtime(placement_options());
    array = u8_array(runtime, kSim0, random_bytes(1000, 3));
  }
  CHECK(array.to_vector<std::uint8_t>() == random_bytes(1000, 3));
  auto error = error_from([&] { device_put(array, kCpu0); });
  CHECK(error.code() == ErrorCode::kUnavailable);
  CHECK(contains(error.what(), "no longer exists"));
}
