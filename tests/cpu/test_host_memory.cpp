// The cpu backend's memory figures, the plugin SDK's host memory
// (plugin_sdk/host_memory.hpp): the host's, capped by RLIMIT_AS and the
// cgroup's memory limit. Made-up /proc and /sys trees reach every kind of
// limit; a child under a real RLIMIT_AS checks the plugin end to end.
#include "support/fork_child.hpp"
#include "support/plugin_harness.hpp"
#include "support/temp_dir.hpp"

#include <backplane/plugin_sdk/host_memory.hpp>

#include <sys/resource.h>

#include <fstream>
#include <string>

namespace backplane::testing {
namespace {

namespace sdk = backplane::plugin_sdk;

constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;
constexpr std::uint64_t kGiB = std::uint64_t{1} << 30;

const BP_PluginApi& cpu_plugin() {
  static const BP_PluginApi& api = load_plugin(BP_TEST_CPU_PLUGIN);
  return api;
}

// A machine of 16 GiB with 12 GiB available, as /proc/meminfo says it.
void write_machine(const TempDir& root, std::uint64_t vm_size = 0) {
  root.write("proc/meminfo", "MemTotal:       16777216 kB\nMemFree:         1000 kB\nMemAvailable:   12582912 kB\n");
  root.write("proc/self/status", "Name:\ttest\nVmSize:\t  " + std::to_string(vm_size / 1024) + " kB\n");
}

std::string mountinfo_line(const std::string& mount_root, const std::string& mount_point, const std::string& type,
                           const std::string& options) {
  return "35 31 0:32 " + mount_root + " " + mount_point + " rw,relatime shared:9 - " + type + " cgroup " + options +
         "\n";
}

sdk::HostMemorySources under(const TempDir& root, std::uint64_t address_space_limit = sdk::kNoMemoryLimit) {
  return {root.path().string(), address_space_limit};
}

}  // namespace

TEST_CASE("[cpu] memory figures are the machine's when nothing limits the process") {
  TempDir root;
  write_machine(root);
  const sdk::MemoryFigures memory = sdk::host_memory(under(root));
  CHECK(memory.total == 16 * kGiB);
  CHECK(memory.free == 12 * kGiB);
}

TEST_CASE("[cpu] RLIMIT_AS caps total and free, less what is already mapped") {
  TempDir root;
  write_machine(root, 1 * kGiB);
  const sdk::MemoryFigures memory = sdk::host_memory(under(root, 4 * kGiB));
  CHECK(memory.total == 4 * kGiB);
  CHECK(memory.free == 3 * kGiB);
  write_machine(root, 5 * kGiB);  // more mapped than the limit allows: nothing left
  CHECK(sdk::host_memory(under(root, 4 * kGiB)).free == 0);
}

TEST_CASE("[cpu] a cgroup v2 memory.max caps the figures, the tightest level up the hierarchy winning") {
  TempDir root;
  write_machine(root);
  root.write("proc/self/cgroup", "0::/job/step\n");
  root.write("proc/self/mountinfo", mountinfo_line("/", "/sys/fs/cgroup", "cgroup2", "rw,nsdelegate"));
  root.write("sys/fs/cgroup/job/step/memory.max", "max\n");
  root.write("sys/fs/cgroup/job/step/memory.current", "100\n");
  root.write("sys/fs/cgroup/job/memory.max", std::to_string(2 * kGiB) + "\n");
  root.write("sys/fs/cgroup/job/memory.current", std::to_string(512 * kMiB) + "\n");
  sdk::MemoryFigures memory = sdk::host_memory(under(root));
  CHECK(memory.total == 2 * kGiB);
  CHECK(memory.free == 2 * kGiB - 512 * kMiB);

  root.write("sys/fs/cgroup/job/step/memory.max", std::to_string(1 * kGiB) + "\n");
  root.write("sys/fs/cgroup/job/step/memory.current", std::to_string(1 * kGiB + 5) + "\n");  // over its limit
  memory = sdk::host_memory(under(root));
  CHECK(memory.total == 1 * kGiB);
  CHECK(memory.free == 0);
}

TEST_CASE("[cpu] a cgroup v1 memory controller caps the figures; a mount showing part of the hierarchy too") {
  TempDir root;
  write_machine(root);
  root.write("proc/self/cgroup", "5:devices:/docker/abc\n4:memory:/docker/abc\n0::/\n");
  root.write("proc/self/mountinfo", mountinfo_line("/", "/sys/fs/cgroup/devices", "cgroup", "rw,devices") +
                                        mountinfo_line("/docker", "/sys/fs/cgroup/memory", "cgroup", "rw,memory"));
  // The mount's root is /docker: the group's directory is <mount>/abc.
  root.write("sys/fs/cgroup/memory/abc/memory.limit_in_bytes", std::to_string(3 * kGiB) + "\n");
  root.write("sys/fs/cgroup/memory/abc/memory.usage_in_bytes", std::to_string(1 * kGiB) + "\n");
  root.write("sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");  // v1's "no limit"
  const sdk::MemoryFigures memory = sdk::host_memory(under(root));
  CHECK(memory.total == 3 * kGiB);
  CHECK(memory.free == 2 * kGiB);
}

TEST_CASE("[cpu] under a real RLIMIT_AS the plugin reports what the process can still map") {
  Backend backend(cpu_plugin());
  const BP_DeviceInfoArgs unlimited = backend.info(0);
  const ChildOutcome outcome = run_forked([&] {
    Checks checks;
    std::ifstream status("/proc/self/status");
    std::string line;
    std::uint64_t mapped = 0;
    while (std::getline(status, line)) {
      if (line.starts_with("VmSize:")) mapped = std::stoull(line.substr(7)) * 1024;
    }
    checks.expect(mapped > 0, "VmSize read from /proc/self/status");
    const rlimit limit{mapped + 256 * kMiB, mapped + 256 * kMiB};
    checks.expect(setrlimit(RLIMIT_AS, &limit) == 0, "setrlimit(RLIMIT_AS)");
    const BP_DeviceInfoArgs info = backend.info(0);
    checks.expect(info.memory_total <= mapped + 256 * kMiB,
                  "total within RLIMIT_AS: " + std::to_string(info.memory_total));
    checks.expect(info.memory_free <= 256 * kMiB,
                  "free within what RLIMIT_AS leaves: " + std::to_string(info.memory_free));
    BP_Buffer* buffer = nullptr;
    const PluginStatus refused = backend.allocate(1 * kGiB, &buffer);
    checks.expect(!refused.ok(), "a 1 GiB allocation fails under a 256 MiB margin");
    const std::string message = refused.message();
    // The free figure is what the limit leaves (MiB), not the machine's
    // (GiB); the total is the limit's only where the limit is below the
    // RAM (under AddressSanitizer, whose shadow memory is terabytes of
    // mappings, it is not).
    checks.expect(message.find(" MiB free of ") != std::string::npos,
                  "the message gives the limited free figure: " + message);
    return checks.failures();
  });
  CHECK_CHILD_PASSED(outcome);
  CHECK(unlimited.memory_total > 256 * kMiB);
}

}  // namespace backplane::testing
