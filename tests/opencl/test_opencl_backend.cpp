// The opencl plugin through the raw ABI: discovery and its reasons, memory,
// copies, events, pinned staging, convert_integers and error messages. The
// device cases run on whatever OpenCL device the loader finds (PoCL's CPU
// device in CI) and print "skipped" with the probe's reason where there is
// none.
#include "support/fork_child.hpp"
#include "support/plugin_harness.hpp"

#include <sys/stat.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using namespace backplane::testing;

namespace {

const BP_PluginApi& api() {
  static const BP_PluginApi& loaded = load_plugin(BP_TEST_OPENCL_PLUGIN);
  return loaded;
}

struct ProbeAnswer {
  bool available = false;
  std::string reason;
  std::int32_t priority = 0;
};

ProbeAnswer probe(const Backend& backend) {
  auto args = backplane::detail::probe_args(backend.handle(), -1234);
  BP_REQUIRE_OK(api().probe(&args));
  return {args.available == 1, std::string(args.reason, args.reason_size), args.priority};
}

// True when the machine has an OpenCL device; otherwise says why, once per case.
bool have_device(const Backend& backend) {
  const ProbeAnswer answer = probe(backend);
  if (!answer.available) MESSAGE("skipped: no OpenCL device (" << answer.reason << ")");
  return answer.available;
}

std::string attribute(const BP_DeviceInfoArgs& info, const std::string& key) {
  for (std::size_t index = 0; index < info.attribute_count; ++index) {
    const BP_KeyValue& pair = info.attributes[index];
    if (std::string(pair.key, pair.key_size) == key) return std::string(pair.value, pair.value_size);
  }
  return "<missing>";
}

PluginStatus convert(const Backend& backend, BP_Buffer* source, std::uint64_t source_offset, BP_IntegerType source_type,
                     BP_Buffer* destination, std::uint64_t destination_offset, BP_IntegerType destination_type,
                     std::uint64_t count) {
  auto args = backplane::detail::convert_integers_args(backend.handle(), source, source_offset, source_type,
                                                       destination, destination_offset, destination_type, count);
  PluginStatus submitted = status_of(api().convert_integers(&args));
  if (!submitted.ok()) return submitted;
  PluginStatus waited = backend.wait(args.event);
  api().event_destroy(backend.handle(), args.event);
  return waited;
}

template <class T>
std::vector<T> read_back(const Backend& backend, BP_Buffer* buffer, std::uint64_t offset, std::size_t count) {
  std::vector<T> values(count);
  BP_REQUIRE_OK(backend.to_host(buffer, offset, values.data(), count * sizeof(T)));
  return values;
}

}  // namespace

TEST_CASE("[opencl] the table: name, ABI 1.4, capabilities, priority and DLPack device type") {
  CHECK(std::string(api().name, api().name_size) == "opencl");
  CHECK(api().abi_major == BP_ABI_MAJOR);
  CHECK(api().abi_minor == 4);
  CHECK(api().priority == 5);            // below cpu unless the probe finds a GPU
  CHECK(api().dlpack_device_type == 4);  // kDLOpenCL
  CHECK((api().capabilities & BP_CAPABILITY_HOST_ADDRESSABLE) == 0);
  CHECK((api().capabilities & BP_CAPABILITY_PINNED_HOST) != 0);
  CHECK((api().capabilities & BP_CAPABILITY_ASYNC) != 0);
  CHECK((api().capabilities & BP_CAPABILITY_CONVERT_INTEGERS) != 0);
  CHECK((api().capabilities & BP_CAPABILITY_EVENT_TIMING) != 0);
  CHECK((api().capabilities & BP_CAPABILITY_PROBE_IN_CHILD) != 0);  // the driver stays out of unused processes
  CHECK(exported_symbols(BP_TEST_OPENCL_PLUGIN) == std::vector<std::string>{"backplane_plugin_entry"});
}

TEST_CASE("[opencl] no ICD loader: unavailable, naming the library and what to install") {
  Backend backend(api(), {{"library", "/nonexistent/libOpenCL.so.1"}});
  const ProbeAnswer answer = probe(backend);
  CHECK_FALSE(answer.available);
  CHECK(contains(answer.reason, "no OpenCL ICD loader: /nonexistent/libOpenCL.so.1 not found ("));
  CHECK(contains(answer.reason, "ocl-icd-libopencl1"));
  CHECK(backend.device_count() == 0);
  BP_Buffer* buffer = nullptr;
  const PluginStatus refused = backend.allocate(16, &buffer);
  CHECK(refused.code() == ErrorCode::kUnavailable);
  CHECK(contains(refused.message(), "no OpenCL ICD loader"));
}

TEST_CASE("[opencl] options: unknown keys and an empty library are refused") {
  BP_Backend* handle = nullptr;
  PluginStatus unknown = try_create(api(), {{"devices", "2"}}, &handle);
  CHECK(unknown.code() == ErrorCode::kInvalidArgument);
  CHECK(contains(unknown.message(), "unknown option \"devices\""));
  CHECK(contains(unknown.message(), "known options: library, build_options"));
  PluginStatus empty = try_create(api(), {{"library", ""}}, &handle);
  CHECK(empty.code() == ErrorCode::kInvalidArgument);
  CHECK(contains(empty.message(), "library"));
}

// Run by the opencl-no-icd test, with OCL_ICD_VENDORS naming an empty directory.
TEST_CASE("[opencl][no-icd] a loader without drivers: unavailable, naming where drivers are looked up") {
  const char* vendors = std::getenv("OCL_ICD_VENDORS");
  if (vendors == nullptr) {
    MESSAGE("skipped: run with OCL_ICD_VENDORS set to an empty directory (the opencl-no-icd test does)");
    return;
  }
  ::mkdir(vendors, 0755);  // made here, so that the directory exists and is empty
  Backend backend(api());
  const ProbeAnswer answer = probe(backend);
  CHECK_FALSE(answer.available);
  CHECK(contains(answer.reason, "no OpenCL platforms"));
  CHECK(contains(answer.reason, "libOpenCL.so.1 found no driver"));
  CHECK(contains(answer.reason, "/etc/OpenCL/vendors"));
  CHECK(contains(answer.reason, std::string("OCL_ICD_VENDORS=\"") + vendors + "\""));
  CHECK(contains(answer.reason, "pocl-opencl-icd"));
  CHECK(backend.device_count() == 0);
}

TEST_CASE("[opencl][device] probe: available, priority from the device types, attributes of every device") {
  Backend backend(api());
  const ProbeAnswer answer = probe(backend);
  if (!have_device(backend)) return;
  CHECK(contains(answer.reason, "OpenCL device(s): opencl:0 "));
  const std::int32_t count = backend.device_count();
  REQUIRE(count >= 1);
  bool accelerator = false;
  for (std::int32_t ordinal = 0; ordinal < count; ++ordinal) {
    const BP_DeviceInfoArgs info = backend.info(ordinal);
    CAPTURE(ordinal);
    CHECK(info.name_size > 0);
    CHECK(info.memory_total > 0);
    CHECK(info.memory_free == BP_MEMORY_FREE_UNKNOWN);  // OpenCL has no portable free-memory query
    for (const char* key : {"vendor", "platform", "opencl_version", "driver_version", "device_type",
                            "global_memory_size", "max_allocation_size", "compute_units"}) {
      CHECK_MESSAGE(attribute(info, key) != "<missing>", key);
    }
    CHECK(attribute(info, "global_memory_size") == std::to_string(info.memory_total));
    CHECK(attribute(info, "opencl_version").rfind("OpenCL ", 0) == 0);
    const std::string type = attribute(info, "device_type");
    CHECK((type == "CPU") == (info.kind == BP_DEVICE_KIND_CPU));
    accelerator = accelerator || type != "CPU";
  }
  CHECK(answer.priority == (accelerator ? 50 : 5));
  // A second backend numbers the devices the same way.
  Backend again(api());
  REQUIRE(again.device_count() == count);
  for (std::int32_t ordinal = 0; ordinal < count; ++ordinal) {
    CHECK(std::string(again.info(ordinal).name, again.info(ordinal).name_size) ==
          std::string(backend.info(ordinal).name, backend.info(ordinal).name_size));
  }
}

TEST_CASE("[opencl][device] device memory has no host address; copies round-trip at odd offsets") {
  Backend backend(api());
  if (!have_device(backend)) return;
  void* address = reinterpret_cast<void*>(1);
  BP_Buffer* buffer = nullptr;
  constexpr std::uint64_t kSize = (1u << 20) + 13;
  BP_REQUIRE_OK(backend.allocate(kSize, &buffer, &address));
  CHECK(address == nullptr);
  const auto data = random_bytes(kSize - 8, 1);
  BP_REQUIRE_OK(backend.to_device(buffer, 5, data.data(), data.size()));
  std::vector<unsigned char> back(data.size());
  BP_REQUIRE_OK(backend.to_host(buffer, 5, back.data(), back.size()));
  CHECK(back == data);

  // device -> device: another buffer, then overlapping ranges of one buffer.
  BP_Buffer* other = backend.allocate_ok(kSize);
  BP_REQUIRE_OK(backend.device_to_device(buffer, 5, other, 3, 1000));
  std::vector<unsigned char> copied(1000);
  BP_REQUIRE_OK(backend.to_host(other, 3, copied.data(), copied.size()));
  CHECK(copied == std::vector<unsigned char>(data.begin(), data.begin() + 1000));
  BP_REQUIRE_OK(backend.device_to_device(buffer, 5, buffer, 105, 1000));  // overlaps
  BP_REQUIRE_OK(backend.to_host(buffer, 105, copied.data(), copied.size()));
  CHECK(copied == std::vector<unsigned char>(data.begin(), data.begin() + 1000));

  // Size 0: allocates, copies nothing, frees.
  BP_Buffer* empty = backend.allocate_ok(0);
  BP_CHECK_OK(backend.to_device(empty, 0, nullptr, 0));
  BP_CHECK_OK(backend.free(empty));
  BP_CHECK_OK(backend.free(other));
  BP_CHECK_OK(backend.free(buffer));
}

TEST_CASE("[opencl][device] async copies hand out events that complete, wait and destroy") {
  Backend backend(api());
  if (!have_device(backend)) return;
  constexpr std::uint64_t kSize = 8u << 20;
  BP_Buffer* buffer = backend.allocate_ok(kSize);
  const auto data = random_bytes(kSize, 2);
  auto upload = backplane::detail::copy_to_device_args(backend.handle(), buffer, 0, data.data(), kSize);
  BP_REQUIRE_OK(api().copy_to_device_async(&upload));
  REQUIRE(upload.event != nullptr);
  std::vector<unsigned char> back(kSize);
  auto download = backplane::detail::copy_to_host_args(backend.handle(), buffer, 0, back.data(), kSize);
  BP_REQUIRE_OK(api().copy_to_host_async(&download));  // in order after the upload
  BP_CHECK_OK(backend.wait(download.event));
  CHECK(backend.query(download.event) == 1);
  CHECK(backend.query(upload.event) == 1);
  BP_CHECK_OK(backend.wait(upload.event));  // again: still fine
  api().event_destroy(backend.handle(), upload.event);
  api().event_destroy(backend.handle(), download.event);
  CHECK(back == data);
  BP_CHECK_OK(backend.free(buffer));
}

TEST_CASE("[opencl][device] pinned host memory is mapped: a host address that stages copies both ways") {
  Backend backend(api());
  if (!have_device(backend)) return;
  constexpr std::uint64_t kSize = (2u << 20) + 7;
  BP_Buffer* pinned = nullptr;
  void* address = nullptr;
  BP_REQUIRE_OK(backend.allocate(kSize, &pinned, &address, 0, BP_MEMORY_PINNED_HOST));
  REQUIRE(address != nullptr);
  const auto data = random_bytes(kSize, 3);
  std::memcpy(address, data.data(), kSize);
  BP_Buffer* device = backend.allocate_ok(kSize);
  BP_REQUIRE_OK(backend.to_device(device, 0, address, kSize));
  std::memset(address, 0, kSize);
  BP_REQUIRE_OK(backend.device_to_device(device, 0, pinned, 0, kSize));  // device -> pinned buffer
  CHECK(std::memcmp(address, data.data(), kSize) == 0);
  std::vector<unsigned char> back(100);
  BP_REQUIRE_OK(backend.to_host(pinned, kSize - 100, back.data(), 100));  // a pinned buffer reads like any
  CHECK(back == std::vector<unsigned char>(data.end() - 100, data.end()));
  BP_CHECK_OK(backend.free(pinned));
  BP_CHECK_OK(backend.free(device));
}

TEST_CASE("[opencl][device] convert_integers widens U8/U16/U32 to I32/I64 at offsets, on the device") {
  Backend backend(api());
  if (!have_device(backend)) return;
  constexpr std::size_t kCount = 10007;
  std::vector<std::uint16_t> u16(kCount + 3);
  std::vector<std::uint8_t> u8(kCount);
  std::vector<std::uint32_t> u32(kCount);
  for (std::size_t index = 0; index < u16.size(); ++index) u16[index] = static_cast<std::uint16_t>(65535 - index * 7);
  for (std::size_t index = 0; index < kCount; ++index) {
    u8[index] = static_cast<std::uint8_t>(255 - index);
    u32[index] = 0xFFFFFFF0u - static_cast<std::uint32_t>(index);
  }
  BP_Buffer* source = backend.allocate_ok(u16.size() * 2);
  BP_Buffer* bytes = backend.allocate_ok(kCount);
  BP_Buffer* words = backend.allocate_ok(kCount * 4);
  BP_Buffer* wide = backend.allocate_ok((kCount + 2) * 8);
  BP_REQUIRE_OK(backend.to_device(source, 0, u16.data(), u16.size() * 2));
  BP_REQUIRE_OK(backend.to_device(bytes, 0, u8.data(), kCount));
  BP_REQUIRE_OK(backend.to_device(words, 0, u32.data(), kCount * 4));

  BP_REQUIRE_OK(convert(backend, source, 6, BP_INTEGER_U16, wide, 16, BP_INTEGER_I64, kCount));
  std::vector<std::int64_t> expected64(u16.begin() + 3, u16.end());
  CHECK(read_back<std::int64_t>(backend, wide, 16, kCount) == expected64);

  BP_REQUIRE_OK(convert(backend, source, 0, BP_INTEGER_U16, wide, 4, BP_INTEGER_I32, kCount));
  std::vector<std::int32_t> expected32(u16.begin(), u16.begin() + kCount);
  CHECK(read_back<std::int32_t>(backend, wide, 4, kCount) == expected32);

  BP_REQUIRE_OK(convert(backend, bytes, 0, BP_INTEGER_U8, wide, 0, BP_INTEGER_I32, kCount));
  CHECK(read_back<std::int32_t>(backend, wide, 0, kCount) == std::vector<std::int32_t>(u8.begin(), u8.end()));
  BP_REQUIRE_OK(convert(backend, bytes, 0, BP_INTEGER_U8, wide, 0, BP_INTEGER_I64, kCount));
  CHECK(read_back<std::int64_t>(backend, wide, 0, kCount) == std::vector<std::int64_t>(u8.begin(), u8.end()));
  BP_REQUIRE_OK(convert(backend, words, 0, BP_INTEGER_U32, wide, 0, BP_INTEGER_I64, kCount));
  CHECK(read_back<std::int64_t>(backend, wide, 0, kCount) == std::vector<std::int64_t>(u32.begin(), u32.end()));

  const PluginStatus narrowing = convert(backend, words, 0, BP_INTEGER_U32, wide, 0, BP_INTEGER_I32, 4);
  CHECK(narrowing.code() == ErrorCode::kInvalidArgument);
  CHECK(contains(narrowing.message(), "cannot widen U32 to I32 (supported: U8 -> U16/U32/I32/I64"));
  const PluginStatus misaligned = convert(backend, source, 1, BP_INTEGER_U16, wide, 0, BP_INTEGER_I64, 4);
  CHECK(misaligned.code() == ErrorCode::kInvalidArgument);
  CHECK(contains(misaligned.message(), "source offset 1 for U16"));
  BP_CHECK_OK(convert(backend, source, 0, BP_INTEGER_U16, wide, 0, BP_INTEGER_I64, 0));  // nothing to do
  for (BP_Buffer* buffer : {source, bytes, words, wide}) BP_CHECK_OK(backend.free(buffer));
}

TEST_CASE("[opencl][device] a widening kernel that does not build is an error carrying the build log") {
  // Indices that are not integers: the OpenCL C compiler refuses the source.
  Backend backend(api(), {{"build_options", "-Dulong=float"}});
  if (!have_device(backend)) return;
  BP_Buffer* source = backend.allocate_ok(64);
  BP_Buffer* destination = backend.allocate_ok(256);
  const PluginStatus failed = convert(backend, source, 0, BP_INTEGER_U16, destination, 0, BP_INTEGER_I64, 8);
  CHECK(failed.code() == ErrorCode::kDevice);
  CHECK(contains(failed.message(),
                 "convert_integers: building the widening kernels on opencl:0 failed: "
                 "clBuildProgram with options \"-Dulong=float\": CL_BUILD_PROGRAM_FAILURE; build log:\n"));
  CHECK_FALSE(contains(failed.message(), "build log:\n(empty)"));
  // Copies still work, and the next conversion reports the same.
  const auto data = random_bytes(64, 5);
  BP_CHECK_OK(backend.to_device(source, 0, data.data(), 64));
  CHECK(convert(backend, source, 0, BP_INTEGER_U16, destination, 0, BP_INTEGER_I64, 8).code() == ErrorCode::kDevice);
  BP_CHECK_OK(backend.free(source));
  BP_CHECK_OK(backend.free(destination));
}

TEST_CASE("[opencl][device] errors name the OpenCL call, the size, the device and the CL error") {
  Backend backend(api());
  if (!have_device(backend)) return;
  const BP_DeviceInfoArgs info = backend.info(0);
  BP_Buffer* buffer = nullptr;
  const PluginStatus huge = backend.allocate(info.memory_total * 16, &buffer);
  CHECK(huge.code() == ErrorCode::kOutOfMemory);
  CHECK(contains(huge.message(), "clCreateBuffer of "));
  CHECK(contains(huge.message(), " GiB on opencl:0 failed: CL_"));
  const PluginStatus pinned = backend.allocate(info.memory_total * 16, &buffer, nullptr, 0, BP_MEMORY_PINNED_HOST);
  CHECK(pinned.code() == ErrorCode::kOutOfMemory);
  CHECK(contains(pinned.message(), "clCreateBuffer(CL_MEM_ALLOC_HOST_PTR) of "));
  // The device still works.
  BP_Buffer* small = backend.allocate_ok(64);
  const auto data = random_bytes(64, 4);
  BP_CHECK_OK(backend.to_device(small, 0, data.data(), 64));
  const PluginStatus past_end = backend.to_device(small, 60, data.data(), 5);
  CHECK(past_end.code() == ErrorCode::kOutOfRange);
  BP_CHECK_OK(backend.free(small));
}

TEST_CASE("[opencl][device] fork: a child refuses the parent's OpenCL, with the reason") {
  Backend backend(api());
  if (!have_device(backend)) return;
  BP_Buffer* buffer = backend.allocate_ok(64);  // the device is in use in the parent
  const auto outcome = backplane::testing::run_forked([&]() -> std::string {
    backplane::testing::Checks checks;
    BP_Buffer* other = nullptr;
    const PluginStatus refused = backend.allocate(64, &other);
    checks.expect(refused.code() == ErrorCode::kUnavailable, "allocate in the child: " + refused.message());
    checks.expect(contains(refused.message(), "before fork(); OpenCL drivers do not survive fork"), refused.message());
    // A buffer of the parent's is refused too, before any hook reaches the driver.
    std::vector<std::uint8_t> bytes(64, 7);
    const PluginStatus copy = backend.to_device(buffer, 0, bytes.data(), bytes.size());
    checks.expect(copy.code() == ErrorCode::kUnavailable, "copy_to_device in the child: " + copy.message());
    checks.expect(contains(copy.message(), "copy_to_device: OpenCL was initialised in process "), copy.message());
    const PluginStatus read = backend.to_host(buffer, 0, bytes.data(), bytes.size());
    checks.expect(contains(read.message(), "copy_to_host: OpenCL was initialised in process "), read.message());
    Backend fresh(api());
    const ProbeAnswer answer = probe(fresh);
    checks.expect(!answer.available, "a backend made in the child is available");
    checks.expect(contains(answer.reason, "OpenCL was initialised in process "), answer.reason);
    checks.expect(contains(answer.reason, "'spawn'"), answer.reason);
    return checks.failures();
  });
  CHECK_CHILD_PASSED(outcome);
  BP_CHECK_OK(backend.free(buffer));  // the parent is unaffected
}
