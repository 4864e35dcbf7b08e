// Every probe reason, and the answer in a forked child, on any machine: each case re-runs itself in a child
// process whose libcuda.so.1 is the fake in fake_driver/ (LD_LIBRARY_PATH is
// searched before the system's driver), configured through its environment.
#include "cuda_plugin_fixture.hpp"
#include "support/fork_child.hpp"

#include <filesystem>
#include <string>
#include <vector>

using backplane::testing::api;
using backplane::testing::Backend;
using backplane::testing::over_fake_driver;
using backplane::testing::take;

namespace {

// Calls the fake made that would need a context (probe must make none).
int context_calls() {
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  REQUIRE(driver != nullptr);
  using Counter = int (*)();
  auto counter = reinterpret_cast<Counter>(dlsym(driver, "bp_fake_cuda_context_calls"));
  const bool is_fake = counter != nullptr;
  REQUIRE_MESSAGE(is_fake, "libcuda.so.1 in this process is not the fake");
  return counter();
}

}  // namespace

TEST_CASE("[cuda] fake driver: too old, naming both versions") {
  if (!over_fake_driver("*fake driver: too old*", {"BP_FAKE_CUDA_VERSION=12020"})) return;
  Backend backend;
  CHECK_FALSE(backend.available());
  CHECK(backend.reason().rfind("NVIDIA driver too old: it supports CUDA 12.2, this plugin needs CUDA ", 0) == 0);
  CHECK(backend.reason().find(" or newer") != std::string::npos);
  CHECK(backend.device_count() == 0);
}

TEST_CASE("[cuda] fake driver: cuInit finds no device") {
  if (!over_fake_driver("*fake driver: cuInit finds no device*",
                        {"BP_FAKE_CUDA_VERSION=99000", "BP_FAKE_CUDA_INIT=100", "CUDA_VISIBLE_DEVICES"})) {
    return;
  }
  Backend backend;
  CHECK_FALSE(backend.available());
  CHECK(backend.reason() == "no CUDA devices (cuInit: CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected)");
  CHECK(backend.device_count() == 0);
}

TEST_CASE("[cuda] fake driver: zero devices names CUDA_VISIBLE_DEVICES") {
  if (!over_fake_driver("*fake driver: zero devices*",
                        {"BP_FAKE_CUDA_VERSION=99000", "BP_FAKE_CUDA_DEVICES=0", "CUDA_VISIBLE_DEVICES="})) {
    return;
  }
  Backend backend;
  CHECK_FALSE(backend.available());
  CHECK(backend.reason() == "no CUDA devices (CUDA_VISIBLE_DEVICES=\"\")");
}

TEST_CASE("[cuda] fake driver: initialisation failure carries the CUDA error") {
  if (!over_fake_driver("*fake driver: initialisation failure*",
                        {"BP_FAKE_CUDA_VERSION=99000", "BP_FAKE_CUDA_INIT=999"})) {
    return;
  }
  Backend backend;
  CHECK_FALSE(backend.available());
  CHECK(backend.reason() == "CUDA initialisation failed: cuInit: CUDA_ERROR_UNKNOWN: unknown error");
  auto allocate = backplane::detail::memory_allocate_args(backend.handle(), 0, BP_MEMORY_DEVICE, 16);
  const auto refused = take(api().memory_allocate(&allocate));
  CHECK(refused.code() == backplane::ErrorCode::kUnavailable);
  CHECK(refused.message() ==
        "memory_allocate: cuda is unavailable: CUDA initialisation failed: cuInit: "
        "CUDA_ERROR_UNKNOWN: unknown error");
}

TEST_CASE("[cuda] fake driver: devices are described without a context") {
  // The first context the driver is asked for fails, so first use shows
  // how that failure reads.
  if (!over_fake_driver("*fake driver: devices are described*",
                        {"BP_FAKE_CUDA_VERSION=99000", "BP_FAKE_CUDA_DEVICES=2",
                         "BP_FAKE_CUDA_FAIL_FUNCTION=cuDevicePrimaryCtxRetain", "BP_FAKE_CUDA_FAIL_CALL=1",
                         "BP_FAKE_CUDA_FAIL_RESULT=801"})) {
    return;
  }
  Backend backend;
  REQUIRE(backend.available());
  CHECK(backend.reason() == "2 CUDA devices, NVIDIA driver for CUDA 99.0");
  REQUIRE(backend.device_count() == 2);

  auto info = backplane::detail::device_info_args(backend.handle(), 1);
  REQUIRE(take(api().device_info(&info)).ok());
  CHECK(std::string(info.name, info.name_size) == "Fake GPU 1");
  CHECK(info.kind == BP_DEVICE_KIND_GPU);
  CHECK(info.memory_total == (uint64_t{24} << 30) + 1);
  CHECK(info.memory_free == BP_MEMORY_FREE_UNKNOWN);  // no context yet, and none is made just to ask
  std::vector<std::string> attributes;
  for (size_t index = 0; index < info.attribute_count; ++index) {
    const BP_KeyValue& attribute = info.attributes[index];
    attributes.push_back(std::string(attribute.key, attribute.key_size) + "=" +
                         std::string(attribute.value, attribute.value_size));
  }
  CHECK(attributes == std::vector<std::string>{
                          "compute_capability=9.0",
                          "multiprocessor_count=132",
                          "pci_bus_id=00000000:66:00.0",
                          "uuid=GPU-10111213-1415-1617-1819-1a1b1c1d1e1f",
                      });
  CHECK(context_calls() == 0);  // probe and device_info touched no context

  // First use asks for the primary context, and its failure says so.
  auto allocate = backplane::detail::memory_allocate_args(backend.handle(), 0, BP_MEMORY_DEVICE, 16);
  const auto failed = take(api().memory_allocate(&allocate));
  CHECK(failed.code() == backplane::ErrorCode::kUnsupported);
  CHECK(failed.message() ==
        "cuDevicePrimaryCtxRetain on cuda:0 failed: CUDA_ERROR_NOT_SUPPORTED: operation not "
        "supported");
  CHECK(allocate.buffer == nullptr);
  CHECK(context_calls() == 1);

  allocate.ordinal = 2;
  CHECK(take(api().memory_allocate(&allocate)).code() == backplane::ErrorCode::kOutOfRange);
}

TEST_CASE("[cuda] fake driver: a forked child gets a clear error, the parent keeps the driver") {
  if (!over_fake_driver("*fake driver: a forked child*", {"BP_FAKE_CUDA_VERSION=99000", "BP_FAKE_CUDA_DEVICES=2"})) {
    return;
  }
  Backend backend;  // cuInit succeeds in this process
  REQUIRE(backend.available());
  const std::string expected = "CUDA was initialised in process " + std::to_string(getpid()) +
                               " before fork(); a CUDA context does not survive fork: use the cuda backend only "
                               "in the parent, or start workers with the 'spawn' method";
  const auto child = backplane::testing::run_forked([&] {
    backplane::testing::Checks checks;
    auto allocate = backplane::detail::memory_allocate_args(backend.handle(), 0, BP_MEMORY_DEVICE, 16);
    const auto failed = take(api().memory_allocate(&allocate));
    checks.expect(failed.code() == backplane::ErrorCode::kUnavailable,
                  "memory_allocate: wrong code " + std::to_string(failed.plugin_code()));
    checks.expect(failed.message() == "memory_allocate: " + expected, "memory_allocate: " + failed.message());
    checks.expect(context_calls() == 0, "the child called the driver for a context");
    // A backend made in the child: probe answers unavailable with the reason.
    auto create = backplane::detail::backend_create_args(nullptr, 0);
    checks.expect(take(api().backend_create(&create)).ok(), "backend_create failed in the child");
    auto probe = backplane::detail::probe_args(create.backend);
    probe.available = 1;
    checks.expect(take(api().probe(&probe)).ok(), "probe failed in the child");
    checks.expect(probe.available == 0, "probe said available in the child");
    checks.expect(std::string(probe.reason, probe.reason_size) == expected,
                  "probe reason: " + std::string(probe.reason, probe.reason_size));
    api().backend_destroy(create.backend);
    return checks.failures();
  });
  CHECK_CHILD_PASSED(child);
  // The parent still reaches the driver.
  auto allocate = backplane::detail::memory_allocate_args(backend.handle(), 0, BP_MEMORY_DEVICE, 16);
  const auto allocated = take(api().memory_allocate(&allocate));
  CHECK_MESSAGE(allocated.ok(), allocated.message());
  auto release = backplane::detail::memory_free_args(backend.handle(), allocate.buffer);
  CHECK(take(api().memory_free(&release)).ok());
}
