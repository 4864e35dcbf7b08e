// Plugins that hang or answer nonsense (tests/plugins/fixtures/hang_probe.cpp
// and malformed.cpp): the loader and the registry turn each into a clear
// status or error, and the other backends keep working.
#include "support/placement_fixture.hpp"

#include <backplane/array.hpp>
#include <backplane/conformance.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>

using namespace backplane;
using namespace backplane::testing;

namespace {

const std::filesystem::path kMisbehavingDir = BP_TEST_MISBEHAVING_DIR;

// The runtime reads BACKPLANE_PROBE_TIMEOUT_MS from its own environment, like
// every BACKPLANE_* variable: tests set it there, not in the process.
Runtime::Options with_timeout(Runtime::Options options, const char* milliseconds) {
  (*options.environment)["BACKPLANE_PROBE_TIMEOUT_MS"] = milliseconds;
  return options;
}
Runtime::Options with_plugin(const std::string& file, Pairs options = {}) {
  Runtime::Options runtime_options = placement_options();
  runtime_options.plugin_paths.insert(runtime_options.plugin_paths.begin(), kMisbehavingDir / file);
  if (!options.empty()) runtime_options.backend_options["malformed"] = std::move(options);
  return runtime_options;
}

// The good backends are untouched: devices listed and a round trip works.
void check_others_work(Runtime& runtime) {
  CHECK(runtime.is_available("cpu"));
  CHECK(runtime.is_available("sim"));
  const auto bytes = random_bytes(100000, 4);
  Array moved = device_put(runtime, device_put(runtime, u8_array(runtime, kCpu0, bytes), kSim0), kCpu1);
  CHECK(moved.to_vector<std::uint8_t>() == bytes);
}

}  // namespace

TEST_CASE("[reliability] a probe that hangs past BACKPLANE_PROBE_TIMEOUT_MS fails with a clear reason") {
  for (int runtime_number = 0; runtime_number < 2; ++runtime_number) {  // a second runtime gives up the same way
    CAPTURE(runtime_number);
    Runtime runtime(with_timeout(with_plugin("backplane-hang_probe.so"), "300"));
    const BackendInfo* hung = runtime.find_backend("hang_probe");
    REQUIRE(hung != nullptr);
    CHECK(hung->status == BackendStatus::kFailed);
    CHECK(hung->reason ==
          "probe did not answer within 300 ms (BACKPLANE_PROBE_TIMEOUT_MS); "
          "the plugin stays loaded but unused");
    CHECK(contains(error_from([&] { runtime.devices("hang_probe"); }).what(), "probe did not answer"));
    check_others_work(runtime);
  }
}

TEST_CASE("[reliability] BACKPLANE_PROBE_TIMEOUT_MS=0 probes without a deadline; a bad value keeps the default") {
  for (const char* value : {"0", "soon", "-5", "99999999999"}) {
    CAPTURE(value);
    Runtime runtime(with_timeout(placement_options(), value));
    check_others_work(runtime);
  }
}

TEST_CASE("[reliability] device counts that lie are errors naming the backend; the runtime stays usable") {
  for (const char* mode : {"negative_count", "huge_count"}) {
    CAPTURE(mode);
    Runtime runtime(with_plugin("backplane-malformed.so", {{"mode", mode}}));
    CHECK(runtime.find_backend("malformed")->status == BackendStatus::kAvailable);
    const Error error = error_from([&] { runtime.devices("malformed"); });
    CHECK(error.code() == ErrorCode::kPlugin);
    CHECK(contains(error.what(), "malformed: device_count answered"));
    CHECK(contains(error.what(), "outside 0..4096"));
    CHECK(error_from([&] { runtime.resolve("malformed:0"); }).code() == ErrorCode::kPlugin);
    check_others_work(runtime);
  }
}

TEST_CASE("[reliability] device_info with NULL name or attributes and a non-zero size is an error") {
  for (const char* mode : {"null_name", "null_attributes"}) {
    CAPTURE(mode);
    Runtime runtime(with_plugin("backplane-malformed.so", {{"mode", mode}}));
    const Error error = error_from([&] { runtime.devices("malformed"); });
    CHECK(error.code() == ErrorCode::kPlugin);
    CHECK(contains(error.what(), "malformed:0: device_info returned NULL with a non-zero size"));
    check_others_work(runtime);
  }
}

TEST_CASE("[reliability] probe answers with NULL text or broken error objects end in a status with a reason") {
  struct Case {
    const char* mode;
    BackendStatus status;
    const char* reason_part;
  };
  const Case cases[] = {
      {"null_reason", BackendStatus::kUnavailable, "the plugin gave no reason"},
      {"null_message", BackendStatus::kFailed, "(the plugin gave no message)"},
      {"null_destroy", BackendStatus::kFailed, "malformed: error without destroy"},
      {"no_backend", BackendStatus::kFailed, "backend_create returned no backend"},
  };
  for (const Case& expected : cases) {
    CAPTURE(expected.mode);
    Runtime runtime(with_plugin("backplane-malformed.so", {{"mode", expected.mode}}));
    const BackendInfo* info = runtime.find_backend("malformed");
    REQUIRE(info != nullptr);
    CHECK(info->status == expected.status);
    CHECK(contains(info->reason, expected.reason_part));
    CHECK_FALSE(runtime.is_available("malformed"));
    check_others_work(runtime);
  }
}

TEST_CASE("[reliability] an allocation that succeeds without a buffer is an error, not a crash") {
  Runtime runtime(with_plugin("backplane-malformed.so", {{"mode", "no_buffer"}}));
  REQUIRE(runtime.devices("malformed").size() == 1);
  const Device device{"malformed", 0};
  const auto bytes = random_bytes(1000, 2);
  for (int attempt = 0; attempt < 2; ++attempt) {
    Error error = error_from([&] { device_put(runtime, u8_array(runtime, kCpu0, bytes), device).block_until_ready(); });
    CHECK(error.code() == ErrorCode::kPlugin);
    CHECK(contains(error.what(), "malformed:0: memory_allocate succeeded but returned no buffer"));
  }
  CHECK(memory_stats(runtime, device).in_use == 0);
  check_others_work(runtime);
}

TEST_CASE("[reliability] sizes of 2^40 in a probe or table fail only that backend, naming the call and the value") {
  struct Case {
    const char* file;
    const char* mode;
    const char* backend;
    const char* reason_part;
  };
  const Case cases[] = {
      {"backplane-malformed.so", "huge_reason", "malformed",
       "probe answered reason_size 1099511627776, more than 65536"},
      {"backplane-malformed.so", "huge_message", "malformed",
       "malformed: huge message_size (cut: message_size 1099511627776, more than 65536)"},
      {"backplane-huge_version.so", "", "huge_version", "bad table: version_size 1099511627776 is more than 256 bytes"},
  };
  for (const Case& expected : cases) {
    CAPTURE(expected.mode);
    CAPTURE(expected.file);
    Runtime runtime(with_plugin(expected.file, {{"mode", expected.mode}}));
    const BackendInfo* info = runtime.find_backend(expected.backend);
    REQUIRE(info != nullptr);
    CHECK(info->status == BackendStatus::kFailed);
    CHECK(contains(info->reason, expected.reason_part));
    CHECK(contains(error_from([&] { runtime.devices(expected.backend); }).what(), expected.reason_part));
    check_others_work(runtime);
  }
}

TEST_CASE("[reliability] device_info sizes and counts of 2^40 are errors naming the device, call and value") {
  const std::pair<const char*, const char*> cases[] = {
      {"huge_name", "malformed:0: device_info answered name_size 1099511627776, more than 65536"},
      {"huge_attributes", "malformed:0: device_info answered attribute_count 1099511627776, more than 1024"},
  };
  for (const auto& [mode, message] : cases) {
    CAPTURE(mode);
    Runtime runtime(with_plugin("backplane-malformed.so", {{"mode", mode}}));
    CHECK(runtime.find_backend("malformed")->status == BackendStatus::kAvailable);
    for (int attempt = 0; attempt < 2; ++attempt) {  // the same answer each time, never "out of host memory"
      const Error error = error_from([&] { runtime.devices("malformed"); });
      CHECK(error.code() == ErrorCode::kPlugin);
      CHECK(std::string(error.what()) == message);
    }
    check_others_work(runtime);
  }
  // A name_size within the bound but past the string's end stops at its NUL.
  Runtime runtime(with_plugin("backplane-malformed.so", {{"mode", "long_name"}}));
  REQUIRE(runtime.devices("malformed").size() == 1);
  CHECK(runtime.devices("malformed")[0].name == "malformed device");
}

TEST_CASE("[reliability] a host-addressable allocation without an address is an error, not a crash later") {
  Runtime runtime(with_plugin("backplane-malformed.so", {{"mode", "null_address"}}));
  const Device device{"malformed", 0};
  const auto bytes = random_bytes(1000, 3);
  const Array tokens = u8_array(runtime, kCpu0, bytes);
  const std::int64_t offsets[] = {0, 10};
  const std::function<void()> uses[] = {
      [&] { device_put(runtime, tokens, device).block_until_ready(); },
      [&] { take_windows(runtime, tokens, offsets, 8, device).block_until_ready(); },
  };
  for (const auto& use : uses) {
    const Error error = error_from(use);
    CHECK(error.code() == ErrorCode::kPlugin);
    CHECK(contains(error.what(), "malformed:0: memory_allocate of "));
    CHECK(contains(error.what(),
                   " bytes succeeded but returned no address, which a host-addressable backend's "
                   "memory must have"));
  }
  CHECK(memory_stats(runtime, device).in_use == 0);
  check_others_work(runtime);
}

TEST_CASE("[reliability] the conformance kit reports sizes of 2^40 as failed checks instead of running out of memory") {
  const std::pair<const char*, const char*> cases[] = {
      {"huge_name", "malformed:0: name_size 1099511627776 is more than 65536; the core refuses the device"},
      {"huge_attributes", "malformed:0: attribute_count 1099511627776 is more than 1024; the core refuses the device"},
      {"huge_message", "message_size 1099511627776 is more than 65536"},
  };
  for (const auto& [mode, detail] : cases) {
    CAPTURE(mode);
    conformance::Options options;
    options.plugin_options = {{"mode", mode}};
    const conformance::Report report = conformance::run(kMisbehavingDir / "backplane-malformed.so", options);
    CHECK_FALSE(report.passed());
    const bool named =
        std::any_of(report.checks.begin(), report.checks.end(), [&](const conformance::CheckResult& check) {
          return check.outcome == conformance::Outcome::kFail && contains(check.detail, detail);
        });
    CHECK(named);
  }
}
