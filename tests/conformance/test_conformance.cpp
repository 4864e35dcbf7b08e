// The conformance suite judged by plugins whose behaviour is known: the CPU
// plugin and the flawed fixture (flawed_plugin.cpp), one flaw at a time, plus
// the load-time refusals and the `backplane conformance` command itself.
#include "support/run_command.hpp"
#include "support/temp_dir.hpp"

#include <backplane/conformance.hpp>

#include <doctest/doctest.h>

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <string>

namespace {

namespace conformance = backplane::conformance;
using conformance::Outcome;

conformance::Report run_flawed(const std::string& flaw) {
  conformance::Options options;
  options.plugin_options = {{"flaw", flaw}};
  return conformance::run(BP_TEST_FLAWED_PLUGIN, options);
}

const conformance::CheckResult& find_check(const conformance::Report& report, const std::string& name) {
  const auto found = std::find_if(report.checks.begin(), report.checks.end(),
                                  [&](const conformance::CheckResult& check) { return check.name == name; });
  if (found == report.checks.end()) FAIL("no check named '" << name << "'");
  return *found;
}

std::vector<std::string> failed_checks(const conformance::Report& report) {
  std::vector<std::string> names;
  for (const auto& check : report.checks) {
    if (check.outcome == Outcome::kFail) names.push_back(check.name + ": " + check.detail);
  }
  return names;
}

std::string tool(const std::string& arguments) {
  return std::string(BP_TEST_TOOL) + " conformance " + arguments + " 2>&1";
}

}  // namespace

TEST_CASE("[conformance] the cpu plugin conforms, with one and with three devices") {
  const auto one = conformance::run(BP_TEST_CPU_PLUGIN);
  CHECK_MESSAGE(one.passed(), doctest::toString(failed_checks(one)));
  CHECK(one.backend_name == "cpu");
  CHECK(find_check(one, "copies: device->device between devices").outcome == Outcome::kNotApplicable);

  conformance::Options options;
  options.plugin_options = {{"devices", "3"}};
  const auto three = conformance::run(BP_TEST_CPU_PLUGIN, options);
  CHECK_MESSAGE(three.passed(), doctest::toString(failed_checks(three)));
  CHECK(three.device_count == 3);
  CHECK(find_check(three, "copies: device->device between devices").outcome == Outcome::kPass);
}

TEST_CASE("[conformance] a plugin built against ABI 1.0 conforms; the 1.1 checks are n/a") {
  const auto report = conformance::run(std::string(BP_TEST_ABI_1_0_DIR) + "/backplane-cpu.so");
  CHECK_MESSAGE(report.passed(), doctest::toString(failed_checks(report)));
  CHECK(report.abi_version == "1.0");
  const auto& wrap =
      find_check(report, "optional: memory_wrap adopts allocated memory; memory_free releases only the handle");
  CHECK(wrap.outcome == Outcome::kNotApplicable);
  CHECK(wrap.detail == "BP_CAPABILITY_WRAP_MEMORY not advertised");
}

TEST_CASE("[conformance] the flawed fixture without a flaw conforms") {
  const auto report = run_flawed("none");
  CHECK_MESSAGE(report.passed(), doctest::toString(failed_checks(report)));
  CHECK(find_check(report, "negotiation: dlpack_device_type is 0 or a DLPack device type").detail == "1");
  CHECK(find_check(report, "probe: the reported priority is sane").detail == "1, the table's");
}

TEST_CASE("[conformance] the 1.2 checks on a 1.0 table: dlpack_device_type n/a, priority left alone") {
  const auto report = conformance::run(std::string(BP_TEST_ABI_1_0_DIR) + "/backplane-cpu.so");
  const auto& dlpack = find_check(report, "negotiation: dlpack_device_type is 0 or a DLPack device type");
  CHECK(dlpack.outcome == Outcome::kNotApplicable);
  CHECK(dlpack.detail.find("ends before dlpack_device_type (ABI 1.2)") != std::string::npos);
  CHECK(find_check(report, "probe: the reported priority is sane").outcome == Outcome::kPass);
  CHECK(
      find_check(report, "probe: a caller's 1.1 struct, without priority, is accepted and not written past").outcome ==
      Outcome::kPass);
}

TEST_CASE("[conformance] a probe priority far outside the usual range is caught") {
  const auto report = run_flawed("wild_priority");
  CHECK(failed_checks(report) ==
        std::vector<std::string>{"probe: the reported priority is sane: probe reported priority 1073741824 (the "
                                 "table says 1); priorities are expected within -1000..1000 (cpu 10, GPUs 100)"});
}

TEST_CASE("[conformance] a probe that writes priority past a 1.1 caller's struct is caught") {
  const auto report = run_flawed("priority_past_struct");
  const auto& check =
      find_check(report, "probe: a caller's 1.1 struct, without priority, is accepted and not written past");
  CHECK(check.outcome == Outcome::kFail);
  CHECK(check.detail.find("probe wrote priority (7) although struct_size") != std::string::npos);
  CHECK(find_check(report, "probe: the reported priority is sane").outcome == Outcome::kPass);
}

TEST_CASE("[conformance] an honestly unavailable backend conforms, device checks n/a with its reason") {
  const auto report = run_flawed("unavailable");
  CHECK_MESSAGE(report.passed(), doctest::toString(failed_checks(report)));
  CHECK_FALSE(report.available);
  const auto& copies = find_check(report, "copies: host->device->host, odd sizes at odd offsets");
  CHECK(copies.outcome == Outcome::kNotApplicable);
  CHECK(copies.detail.find("no such hardware (unavailable on purpose)") != std::string::npos);
  CHECK(find_check(report, "errors: out-of-range ordinals are refused").outcome == Outcome::kPass);
}

TEST_CASE("[conformance] unavailable without a reason fails the probe check") {
  const auto report = run_flawed("no_reason");
  CHECK_FALSE(report.passed());
  const auto& probe = find_check(report, "probe: answers available or unavailable, with a reason when unavailable");
  CHECK(probe.outcome == Outcome::kFail);
  CHECK(probe.detail.find("without a reason") != std::string::npos);
}

TEST_CASE("[conformance] a copy that ignores its destination offset is caught") {
  const auto report = run_flawed("ignore_offset");
  CHECK_FALSE(report.passed());
  const auto& copies = find_check(report, "copies: host->device->host, odd sizes at odd offsets");
  CHECK(copies.outcome == Outcome::kFail);
  CHECK(copies.detail.find("differ") != std::string::npos);
  CHECK(find_check(report, "async: copy_to_device_async with event query/wait/destroy").outcome == Outcome::kFail);
  // Device-to-device copies fill their buffers at offset 0 only: unaffected.
  CHECK(find_check(report, "copies: device->device on one device, odd sizes at odd offsets").outcome == Outcome::kPass);
}

TEST_CASE("[conformance] a plugin accepting out-of-range copies is caught") {
  const auto report = run_flawed("accept_out_of_range");
  CHECK_FALSE(report.passed());
  const auto& sync = find_check(report, "errors: out-of-range copies are refused and move no data");
  CHECK(sync.outcome == Outcome::kFail);
  CHECK(sync.detail.find("copy_to_host of") != std::string::npos);
  CHECK(sync.detail.find("returned success") != std::string::npos);
  CHECK(find_check(report, "errors: out-of-range async copies fail at submission or in event_wait").outcome ==
        Outcome::kFail);
  CHECK(find_check(report, "copies: host->device->host, odd sizes at odd offsets").outcome == Outcome::kPass);
}

TEST_CASE("[conformance] files the loader refuses fail the load check") {
  backplane::testing::TempDir directory;
  std::filesystem::permissions(directory.path(), std::filesystem::perms::owner_all);

  SUBCASE("not a plugin") {
    const auto report = conformance::run(std::string(BP_TEST_FIXTURE_DIR) + "/backplane-no_entry.so");
    REQUIRE(report.checks.size() == 1);
    CHECK(report.checks[0].outcome == Outcome::kFail);
    CHECK(report.checks[0].detail.find("no entry symbol") != std::string::npos);
    CHECK_FALSE(report.passed());
  }
  SUBCASE("a world-writable file") {
    const auto copy = directory / "backplane-cpu.so";
    std::filesystem::copy_file(BP_TEST_CPU_PLUGIN, copy);
    ::chmod(copy.c_str(), 0777);
    const auto report = conformance::run(copy);
    REQUIRE(report.checks.size() == 1);
    CHECK(report.checks[0].detail.find("world-writable") != std::string::npos);
    CHECK_FALSE(report.passed());
  }
  SUBCASE("a FIFO, refused without waiting for a writer") {
    const auto fifo = directory / "backplane-pipe.so";
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    // The tool under `timeout`: without the check dlopen() blocks forever (status 124).
    const auto result = backplane::testing::run_command("timeout 20 " + tool(fifo.string()));
    CHECK(result.exit_status == 1);
    CHECK(result.output.find(fifo.string() + " is a FIFO (named pipe), not a regular file") != std::string::npos);
  }
  SUBCASE("a missing file") {
    const auto report = conformance::run(directory / "backplane-nothing.so");
    CHECK_FALSE(report.passed());
  }
}

TEST_CASE("[conformance] the backend name must match a backplane-<name>.so file name") {
  backplane::testing::TempDir directory;
  std::filesystem::permissions(directory.path(), std::filesystem::perms::owner_all);
  const auto wrong = directory / "backplane-other.so";
  std::filesystem::copy_file(BP_TEST_CPU_PLUGIN, wrong);
  const auto report = conformance::run(wrong);
  const auto& name = find_check(report, "negotiation: backend name matches the file name");
  CHECK(name.outcome == Outcome::kFail);
  CHECK(name.detail.find("declares backend 'cpu'") != std::string::npos);

  const auto free_name = directory / "my_cpu_build.so";
  std::filesystem::copy_file(BP_TEST_CPU_PLUGIN, free_name);
  const auto named_freely = conformance::run(free_name);
  CHECK(find_check(named_freely, "negotiation: backend name matches the file name").outcome == Outcome::kNotApplicable);
  CHECK(named_freely.passed());
}

TEST_CASE("[conformance] backplane conformance prints one line per check and exits non-zero on a failure") {
  const auto good = backplane::testing::run_command(tool(std::string(BP_TEST_CPU_PLUGIN) + " --option devices=2"));
  CHECK(good.exit_status == 0);
  CHECK(good.output.find("pass  copies: device->device between devices") != std::string::npos);
  CHECK(good.output.find("0 failed") != std::string::npos);
  CHECK(good.output.find("[doctest]") == std::string::npos);

  const auto bad =
      backplane::testing::run_command(tool(std::string(BP_TEST_FLAWED_PLUGIN) + " --option flaw=ignore_offset"));
  CHECK(bad.exit_status == 1);
  CHECK(bad.output.find("FAIL  copies: host->device->host, odd sizes at odd offsets  [") != std::string::npos);
  CHECK(bad.output.find("DOES NOT CONFORM") != std::string::npos);

  const auto counted = backplane::testing::run_command(tool(std::string(BP_TEST_CPU_PLUGIN) + " --doctest-summary"));
  CHECK(counted.output.find("[doctest] test cases: ") != std::string::npos);
  CHECK(counted.output.find(" | 0 failed | 7 skipped") != std::string::npos);

  CHECK(backplane::testing::run_command(tool("")).exit_status == 2);
  CHECK(backplane::testing::run_command(tool("a.so b.so")).exit_status == 2);
  CHECK(backplane::testing::run_command(tool("a.so --option novalue")).exit_status == 2);
  const auto unknown_option =
      backplane::testing::run_command(tool(std::string(BP_TEST_CPU_PLUGIN) + " --option bogus=1"));
  CHECK(unknown_option.exit_status == 1);
  CHECK(unknown_option.output.find("FAIL  backend: backend_create with the given options") != std::string::npos);
}

TEST_CASE("[conformance] after a failed devices check, the ordinal checks use the count device_count gave") {
  conformance::Options options;
  options.plugin_options = {{"flaw", "zero_memory"}, {"devices", "2"}};
  const auto report = conformance::run(BP_TEST_FLAWED_PLUGIN, options);
  const auto& devices = find_check(report, "devices: device_info of every device is sane");
  CHECK(devices.outcome == Outcome::kFail);
  CHECK(devices.detail == "flawed:0: memory_total is 0");
  // Ordinal 0 exists: only ordinals past the 2 devices are out of range.
  const auto& ordinals = find_check(report, "errors: out-of-range ordinals are refused");
  CHECK(ordinals.outcome == Outcome::kPass);
  CHECK(ordinals.detail == "ordinals -1, 2, 1002");
  CHECK(find_check(report, "memory: size 0 allocates, takes size-0 copies and frees").detail ==
        "the devices check failed");
  CHECK(failed_checks(report) == std::vector<std::string>{"devices: device_info of every device is sane: "
                                                          "flawed:0: memory_total is 0"});
}

TEST_CASE("[conformance] a probe that returns an error is reported as such, not as unavailable") {
  const auto report = run_flawed("probe_error");
  const auto& probe = find_check(report, "probe: answers available or unavailable, with a reason when unavailable");
  CHECK(probe.outcome == Outcome::kFail);
  CHECK(probe.detail == "probe failed: BP_ERROR_DEVICE: flawed: probe exploded (on purpose)");
  const auto& count = find_check(report, "probe: device_count agrees with probe");
  CHECK(count.outcome == Outcome::kPass);
  CHECK(count.detail == "1 device(s); not compared, the probe failed");
  CHECK(find_check(report, "devices: device_info of every device is sane").detail == "the probe failed");
  CHECK_FALSE(report.probed);

  const auto output =
      backplane::testing::run_command(tool(std::string(BP_TEST_FLAWED_PLUGIN) + " --option flaw=probe_error"));
  CHECK(output.exit_status == 1);
  CHECK(output.output.find("backend flawed test-only (ABI 1.4), probe failed: DOES NOT CONFORM") != std::string::npos);
  CHECK(output.output.find("probe said unavailable") == std::string::npos);
}

TEST_CASE("[conformance] the summary after a failed backend_create says there is no backend instance") {
  const auto output =
      backplane::testing::run_command(tool(std::string(BP_TEST_FLAWED_PLUGIN) + " --option flaw=no_such_flaw"));
  CHECK(output.exit_status == 1);
  CHECK(output.output.find("FAIL  backend: backend_create with the given options") != std::string::npos);
  CHECK(output.output.find("backend flawed test-only (ABI 1.4), no backend instance (backend_create failed): "
                           "DOES NOT CONFORM") != std::string::npos);
  CHECK(output.output.find("0 device(s)") == std::string::npos);
}

TEST_CASE("[conformance] a plugin that crashes the process leaves the name of the check it crashed in last") {
  // stdout only: a sanitizer's report of the abort goes to stderr.
  const auto output =
      backplane::testing::run_command(std::string(BP_TEST_TOOL) + " conformance " + BP_TEST_FLAWED_PLUGIN +
                                      " --option flaw=crash_in_allocate 2>/dev/null");
  CHECK(output.exit_status != 0);
  const std::string last_line = output.output.substr(output.output.rfind('\n', output.output.size() - 2) + 1);
  CHECK(last_line == "....  memory: size 0 allocates, takes size-0 copies and frees\n");
}
