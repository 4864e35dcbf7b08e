// Host memory as this process can use it: the machine's (MemTotal and
// MemAvailable of /proc/meminfo), capped by the process's address-space
// limit (RLIMIT_AS, less what is already mapped) and by the memory limit of
// its cgroup (v2 memory.max, v1 memory.limit_in_bytes, at every level up the
// hierarchy, less that level's usage): an allocation past either fails
// however much the machine has free.
#ifndef BACKPLANE_PLUGINS_CPU_HOST_MEMORY_HPP
#define BACKPLANE_PLUGINS_CPU_HOST_MEMORY_HPP

#include <backplane/plugin_sdk.hpp>

#include <cstdint>
#include <limits>
#include <string>

namespace backplane::cpu {

namespace sdk = backplane::plugin_sdk;

inline constexpr std::uint64_t kNoLimit = std::numeric_limits<std::uint64_t>::max();

// What host_memory reads, so that a test can give a made-up /proc and /sys.
struct HostMemorySources {
  std::string root;                              // prefix of /proc/... and /sys/...: "" is the machine's
  std::uint64_t address_space_limit = kNoLimit;  // RLIMIT_AS's soft limit
};

// This process's RLIMIT_AS, under the real /proc and /sys.
HostMemorySources this_process();

// Total: the smallest of MemTotal, the address-space limit and every cgroup
// limit. Free: the smallest of MemAvailable, the address-space limit less
// VmSize (/proc/self/status), and every cgroup limit less its usage (0 when
// usage is past it). sysinfo() when /proc/meminfo is missing; free unknown
// when nothing answers.
sdk::MemoryFigures host_memory(const HostMemorySources& sources);

}  // namespace backplane::cpu

#endif  // BACKPLANE_PLUGINS_CPU_HOST_MEMORY_HPP
