// Discovery of PJRT backends: the CPU PJRT plugin available with its devices,
// the CUDA PJRT plugin unavailable with its own reason, hostile libraries
// listed as failed with what is wrong, and bad options named.
#include "pjrt_support.hpp"
#include "support/backend_named.hpp"
#include "support/fork_child.hpp"
#include "support/keep_segv_in_child.hpp"
#include "support/temp_dir.hpp"

#include <backplane/array.hpp>

#include <sys/resource.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <thread>

using namespace backplane;
using namespace backplane::testing;

namespace {

std::string fixture(const char* mode) { return std::string(BP_TEST_PJRT_FIXTURE_DIR) + "/hostile-" + mode + ".so"; }

// The pjrt backend's discovery entry for `library` with `options`.
BackendInfo discovered(const std::string& library, const PjrtOptions& options = {},
                       ProbeIsolation isolation = ProbeIsolation::kNone,
                       std::map<std::string, std::string> environment = {}) {
  Runtime::Options made = pjrt_runtime_options(library, options, isolation);
  made.environment = std::move(environment);
  Runtime runtime(made);
  return backend_named(runtime, kPjrtBackend);
}

std::uint64_t meminfo_total() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  std::uint64_t kib = 0;
  while (meminfo >> key >> kib) {
    if (key == "MemTotal:") return kib * 1024;
    meminfo.ignore(1 << 10, '\n');
  }
  return 0;
}

std::string attribute(const DeviceInfo& device, const std::string& key) {
  for (const auto& [name, value] : device.attributes) {
    if (name == key) return value;
  }
  return "(missing)";
}

bool gpu_present() {
  struct stat status {};
  return ::stat("/dev/nvidia0", &status) == 0 || ::stat("/dev/nvidiactl", &status) == 0;
}

}  // namespace

TEST_CASE("[pjrt][discovery] the CPU PJRT plugin is available with the devices its create options ask for") {
  const std::string library = cpu_pjrt_library();
  if (library.empty()) return;
  Runtime runtime(pjrt_runtime_options(library, {{"create.cpu_device_count", "int64:2"}}));
  const BackendInfo& info = backend_named(runtime, kPjrtBackend);
  REQUIRE_MESSAGE(info.status == BackendStatus::kAvailable, info.reason);
  CHECK(info.reason == "platform cpu (cpu) through PJRT 0.81: 2 devices, data path host, " + library);
  CHECK(info.priority == 5);  // below the cpu plugin's 10: cpu:0 stays the default
  CHECK(runtime.default_device().device == Device{"cpu", 0});
  const std::vector<DeviceInfo> devices = runtime.devices(kPjrtBackend);
  REQUIRE(devices.size() == 2);
  for (const DeviceInfo& device : devices) {
    CAPTURE(device.selector());
    CHECK(device.kind == DeviceKind::kCpu);
    CHECK(device.name == "CpuDevice(id=" + std::to_string(device.ordinal) + ")");
    // One figure of host memory for every plugin that serves it (the SDK's).
    CHECK(device.memory_total == runtime.devices("cpu").at(0).memory_total);
    CHECK(device.memory_free.has_value());
    CHECK(attribute(device, "platform") == "cpu");
    CHECK(attribute(device, "pjrt_api_version") == "0.81");
    CHECK(attribute(device, "local_hardware_id") == std::to_string(device.ordinal));
    CHECK(attribute(device, "pjrt_device_kind") == "cpu");
    CHECK(attribute(device, "pjrt_library") == library);
    CHECK(attribute(device, "plugin.xla_version") == "2");
    CHECK(attribute(device, "data_path") == "host");
    CHECK(attribute(device, "memory_total_source") == "host memory (/proc/meminfo, RLIMIT_AS and the cgroup's limit)");
  }
}

// In a container the process can use its cgroup's memory, not the host's; a
// real RLIMIT_AS stands in for both here: the figure is the SDK's, which the
// cpu plugin reports too.
TEST_CASE("[pjrt][discovery] the cpu platform's memory is what the process may use, under RLIMIT_AS too") {
  const std::string library = cpu_pjrt_library();
  if (library.empty()) return;
#if defined(__SANITIZE_ADDRESS__)
  // AddressSanitizer reserves terabytes of shadow memory in every process it
  // starts, the probe helper's too: under a limit below the machine's memory
  // the helper cannot start. The normal build runs this case.
  MESSAGE("not under AddressSanitizer: its shadow memory does not fit a real RLIMIT_AS");
  return;
#endif
  const std::uint64_t machine = meminfo_total();
  const std::uint64_t limit = std::min<std::uint64_t>(machine / 2, std::uint64_t{8} << 30);
  // A child process sets the limit and discovers: the probe helper it starts
  // (which inherits the limit) creates the PJRT client, not the child.
  const ChildOutcome outcome = run_forked([&] {
    Checks checks;
    const rlimit address_space{limit, limit};
    checks.expect(setrlimit(RLIMIT_AS, &address_space) == 0, "setrlimit(RLIMIT_AS)");
    Runtime runtime(pjrt_runtime_options(library));
    const BackendInfo& info = backend_named(runtime, kPjrtBackend);
    checks.expect(info.status == BackendStatus::kAvailable, "available: " + info.reason);
    if (info.status != BackendStatus::kAvailable) return checks.failures();
    const DeviceInfo device = runtime.devices(kPjrtBackend).at(0);
    checks.expect(device.memory_total <= limit,
                  "total within RLIMIT_AS: " + std::to_string(device.memory_total) + " of " + std::to_string(limit));
    checks.expect(device.memory_total < machine, "not the machine's " + std::to_string(machine));
    return checks.failures();
  });
  CHECK_CHILD_PASSED(outcome);
}

TEST_CASE("[pjrt][discovery] data_path=copy keeps the cpu platform's memory behind PJRT calls") {
  const std::string library = cpu_pjrt_library();
  if (library.empty()) return;
  const BackendInfo info = discovered(library, {{"data_path", "copy"}});
  REQUIRE_MESSAGE(info.status == BackendStatus::kAvailable, info.reason);
  CHECK(info.reason.find("data path copy, " + library) != std::string::npos);
}

TEST_CASE("[pjrt][discovery] the CUDA PJRT plugin on a machine without a GPU is unavailable with its own reason") {
  const InstalledLibrary& cuda = installed_pjrt_library("jax-cuda12-pjrt");
  if (cuda.path.empty()) {
    MESSAGE("skipped: " << cuda.missing);
    return;
  }
  if (gpu_present()) {
    MESSAGE("skipped: this machine has an NVIDIA device, so the CUDA PJRT plugin may well be available");
    return;
  }
  const BackendInfo info = discovered(cuda.path);
  CHECK(info.status == BackendStatus::kUnavailable);
  CHECK(info.reason == "No visible GPU devices. (FAILED_PRECONDITION, PJRT 0.116, cuda_version 12090)");
}

TEST_CASE("[pjrt][discovery] a create option PJRT does not know is refused by PJRT itself, naming the key") {
  const InstalledLibrary& cuda = installed_pjrt_library("jax-cuda12-pjrt");
  if (cuda.path.empty()) {
    MESSAGE("skipped: " << cuda.missing);
    return;
  }
  // The GPU plugins check every option name before looking for a GPU.
  const BackendInfo info = discovered(cuda.path, {{"create.no_such_option", "int64:1"}});
  CHECK(info.status == BackendStatus::kFailed);
  CHECK(info.reason.find("refused the create options: Unexpected option name passed to PJRT_Client_Create: "
                         "no_such_option (INVALID_ARGUMENT, PJRT 0.116, cuda_version 12090)") != std::string::npos);
}

TEST_CASE("[pjrt][discovery] hostile PJRT libraries are failed, each with what is wrong") {
  struct Case {
    const char* mode;
    const char* reason;
  };
  const Case cases[] = {
      {"no-symbol", "exports no GetPjrtApi: it is not a PJRT plugin"},
      {"null-api", "returned NULL"},
      {"short-table", "(PJRT 0.81, 64 bytes) ends before PJRT_Plugin_Initialize, which the adapter calls"},
      {"future-major",
       "speaks PJRT 1.0, a major version this adapter does not know: it speaks PJRT 0.x (built "
       "against 0.81)"},
      {"old-minor", "speaks PJRT 0.60, older than PJRT 0.69, the first with PJRT_Client_CreateUninitializedBuffer"},
      {"null-call", "(PJRT 0.81) has no PJRT_Client_CreateUninitializedBuffer (a NULL pointer)"},
  };
  for (const Case& hostile : cases) {
    CAPTURE(hostile.mode);
    const BackendInfo info = discovered(fixture(hostile.mode));
    CHECK(info.status == BackendStatus::kFailed);
    CHECK_MESSAGE(info.reason.find(hostile.reason) != std::string::npos, info.reason);
    CHECK(info.reason.find(fixture(hostile.mode)) != std::string::npos);
  }
}

TEST_CASE("[pjrt][discovery] Client_Create's error code and message become the reason, with the PJRT version") {
  const BackendInfo info = discovered(fixture("error"));
  CHECK(info.status == BackendStatus::kUnavailable);
  CHECK(info.reason ==
        "hostile fixture: no devices are visible to this plugin (FAILED_PRECONDITION, PJRT 0.81, "
        "hostile_fixture 42)");
}

// A PJRT message of megabytes (a compiler's dump, say) is what says why the
// library cannot be used: its beginning is kept, and the cut is said.
TEST_CASE("[pjrt][discovery] a PJRT error message past 64 KiB is cut to its beginning, saying it was cut") {
  const BackendInfo info = discovered(fixture("long-error"));
  CHECK(info.status == BackendStatus::kUnavailable);
  CHECK_MESSAGE(info.reason.starts_with("hostile fixture: the beginning of a long message"),
                info.reason.substr(0, 200));
  CHECK(info.reason.size() <= 65536);
  // 10,000,033 bytes of message and PJRT's code and version after it.
  CHECK(
      info.reason.ends_with(" [cut: 10000086 bytes, more than the 65536 a plugin may answer; this is the beginning]"));
}

// The core's checks of what the adapter answers name the backend the user
// selects (pjrt_test), not the adapter that serves it.
TEST_CASE("[pjrt][discovery] a PJRT library with more devices than the core takes is failed, naming the instance") {
  const BackendInfo info = discovered(fixture("many-devices"));
  CHECK(info.status == BackendStatus::kFailed);
  CHECK(info.reason == "pjrt_test: device_count answered 5000, outside 0..4096");
}

// GPU plugins preallocate most of the device unless told not to: the
// adapter asks every client for preallocate=false, and asks again without it
// when a platform refuses the option by name.
TEST_CASE("[pjrt][discovery] Client_Create is asked not to preallocate, and asked again without it if it refuses") {
  const BackendInfo info = discovered(fixture("options"));
  CHECK(info.status == BackendStatus::kUnavailable);
  CHECK(info.reason ==
        "hostile fixture: asked preallocate=false, refused it, then asked with 0 option(s) (FAILED_PRECONDITION, "
        "PJRT 0.81, hostile_fixture 42)");
}

TEST_CASE("[pjrt][discovery] a library whose Client_Create crashes is failed by the probe process") {
  const KeepSegvInChild keep_segv;
  const BackendInfo info = discovered(fixture("crash"), {}, ProbeIsolation::kProcess);
  CHECK(info.status == BackendStatus::kFailed);
  CHECK_MESSAGE(info.reason.find("SIGSEGV") != std::string::npos, info.reason);
  CHECK(info.reason.find("during probe") != std::string::npos);
}

// The adapter cannot interrupt a PJRT call, so a Client_Create that never
// returns is the probe deadline's to catch (here in this process; in a child
// with BP_CAPABILITY_PROBE_IN_CHILD). What the adapter guarantees is that it
// holds nothing another backend needs while it waits: another PJRT library
// probes and works beside the hung one.
TEST_CASE("[pjrt][discovery] a Client_Create that hangs is failed at the probe deadline and blocks no other library") {
  const BackendInfo info =
      discovered(fixture("hang"), {}, ProbeIsolation::kNone, {{"BACKPLANE_PROBE_TIMEOUT_MS", "300"}});
  CHECK(info.status == BackendStatus::kFailed);
  CHECK_MESSAGE(info.reason.find("did not answer within 300 ms") != std::string::npos, info.reason);
  const std::string library = cpu_pjrt_library();
  if (library.empty()) return;
  Runtime runtime(pjrt_runtime_options(library));
  REQUIRE_MESSAGE(runtime.is_available(kPjrtBackend), backend_named(runtime, kPjrtBackend).reason);
  const std::vector<std::uint8_t> bytes = {1, 2, 3, 4, 5};
  const Array put =
      device_put(runtime, Array::from_host(runtime, Device{"cpu", 0}, DType::kU8, {5}, bytes.data(), 5), pjrt_device());
  CHECK(put.to_vector<std::uint8_t>() == bytes);
}

TEST_CASE("[pjrt][discovery] bad options and bad libraries are failed, naming the option or the file") {
  TempDir directory;
  const std::string text_file = (directory / "not-a-library.so").string();
  std::ofstream(text_file) << "just text\n";
  struct Case {
    std::string library;
    PjrtOptions options;
    std::string reason;
  };
  const std::vector<Case> cases = {
      {"", {}, "the PJRT library 'test' has no path"},
      {"/no/such/libpjrt.so", {}, "cannot use the PJRT library /no/such/libpjrt.so: No such file or directory"},
      {directory.path().string(),
       {},
       "cannot use the PJRT library " + directory.path().string() +
           ": it is a directory, not a regular file (a PJRT plugin is a shared library)"},
      {text_file, {}, "dlopen of PJRT library " + text_file + " failed: "},
      {fixture("error"),
       {{"bogus", "1"}},
       "pjrt_test: unknown option \"bogus\" = \"1\" (known options: library, "
       "data_path, create.<PJRT option>, backend)"},
      {fixture("error"),
       {{"data_path", "sideways"}},
       "pjrt_test: option data_path = \"sideways\" is invalid: expected auto, "
       "host or copy"},
      {fixture("error"),
       {{"create.cpu_device_count", "int64:two"}},
       "pjrt_test: option create.cpu_device_count = \"int64:two\" is invalid: \"two\" is not a 64-bit integer"},
      {fixture("error"),
       {{"create.cpu_device_count", "2"}},
       "option create.cpu_device_count = \"2\" is invalid: expected <type>:<value>, with type int64, bool, float, "
       "string or int64_list"},
      {fixture("error"),
       {{"create.flag", "bool:yes"}},
       "option create.flag = \"bool:yes\" is invalid: \"yes\" is "
       "not true or false"},
      {fixture("error"),
       {{"create.ids", "int64_list:1,,2"}},
       "option create.ids = \"int64_list:1,,2\" is invalid: "
       "\"\" is not a 64-bit integer"},
      {fixture("error"),
       {{"create.x", "complex:1"}},
       "option create.x = \"complex:1\" is invalid: unknown type "
       "\"complex\""},
  };
  for (const Case& bad : cases) {
    CAPTURE(bad.reason);
    Runtime runtime(pjrt_runtime_options(bad.library, bad.options));
    const BackendInfo& info = backend_named(runtime, kPjrtBackend);
    CHECK(info.status == BackendStatus::kFailed);
    CHECK_MESSAGE(info.reason.find(bad.reason) != std::string::npos, info.reason);
  }
}

// The library is judged at discovery, and the adapter loads it at the first
// device use (probe-in-child: discovery probes it in the helper). A name
// re-pointed in between must not change what is loaded.
TEST_CASE("[pjrt][discovery] the first device use loads the library judged, not what its name leads to since") {
  const std::string library = cpu_pjrt_library();
  if (library.empty()) return;
  TempDir directory;
  const std::filesystem::path name = directory / "libpjrt.so";
  std::filesystem::create_symlink(library, name);
  Runtime runtime(pjrt_runtime_options(name.string()));
  REQUIRE_MESSAGE(runtime.is_available(kPjrtBackend), backend_named(runtime, kPjrtBackend).reason);
  // Re-pointed at a hostile library, as the owner of a link could do.
  std::filesystem::create_symlink(fixture("null-api"), directory / "next.so");
  std::filesystem::rename(directory / "next.so", name);
  const std::vector<std::uint8_t> bytes = {7, 8, 9};
  const Array host = Array::from_host(runtime, Device{"cpu", 0}, DType::kU8, {3}, bytes.data(), bytes.size());
  try {
    CHECK(device_put(runtime, host, pjrt_device()).to_vector<std::uint8_t>() == bytes);
  } catch (const Error& error) {
    FAIL("the first device use loaded another library: " << error.what());
  }
}

TEST_CASE("[pjrt][discovery] the devices of a failed PJRT backend are refused with its reason") {
  Runtime runtime(pjrt_runtime_options(fixture("null-api")));
  try {
    (void)runtime.resolve("pjrt_test:0");
    FAIL("pjrt_test:0 resolved");
  } catch (const Error& error) {
    CHECK(error.code() == ErrorCode::kUnavailable);
    CHECK(std::string(error.what()).find("GetPjrtApi of " + fixture("null-api") + " returned NULL") !=
          std::string::npos);
  }
  const std::vector<std::uint8_t> bytes(16, 3);
  const Array host = Array::from_host(runtime, Device{"cpu", 0}, DType::kU8, {16}, bytes.data(), bytes.size());
  try {
    (void)device_put(runtime, host, pjrt_device());
    FAIL("device_put onto a failed backend succeeded");
  } catch (const Error& error) {
    CHECK(std::string(error.what()).find("returned NULL") != std::string::npos);
  }
}

TEST_CASE(
    "[pjrt][discovery] the adapter without a PJRT library is listed as pjrt, unavailable, naming where it looked") {
  Runtime::Options made = pjrt_runtime_options("");
  made.sources.clear();
  Runtime runtime(made);
  const BackendInfo& info = backend_named(runtime, "pjrt");
  CHECK(info.status == BackendStatus::kUnavailable);
  CHECK_MESSAGE(info.reason.find("no PJRT plugin found: looked in Runtime::Options::sources") != std::string::npos,
                info.reason);
  CHECK(runtime.find_backend(kPjrtBackend) == nullptr);
}

TEST_CASE("[pjrt][discovery] one PJRT library under two names is two backends that do not collide") {
  const std::string library = cpu_pjrt_library();
  if (library.empty()) return;
  Runtime::Options made = pjrt_runtime_options(library, {{"create.cpu_device_count", "int64:1"}});
  PluginSource second = made.sources.front();
  second.name = "Second-CPU";
  made.sources.push_back(second);
  made.backend_options["pjrt_second_cpu"] = {{"create.cpu_device_count", "int64:3"}};
  Runtime runtime(made);
  REQUIRE_MESSAGE(runtime.is_available(kPjrtBackend), backend_named(runtime, kPjrtBackend).reason);
  REQUIRE_MESSAGE(runtime.is_available("pjrt_second_cpu"), backend_named(runtime, "pjrt_second_cpu").reason);
  CHECK(runtime.devices(kPjrtBackend).size() == 1);
  CHECK(runtime.devices("pjrt_second_cpu").size() == 3);
  CHECK(runtime.find_backend("pjrt") == nullptr);  // listed only through its libraries
  const std::vector<std::uint8_t> bytes = {9, 8, 7};
  const Array host = Array::from_host(runtime, Device{"cpu", 0}, DType::kU8, {3}, bytes.data(), bytes.size());
  const Array there = device_put(runtime, device_put(runtime, host, pjrt_device()), Device{"pjrt_second_cpu", 2});
  CHECK(there.to_vector<std::uint8_t>() == bytes);
}
