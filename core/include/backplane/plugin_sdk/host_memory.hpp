// Host memory as this process can use it, one figure for every plugin whose
// devices serve host memory (the cpu plugin, the pjrt adapter on the cpu
// platform): the machine's (MemTotal and MemAvailable of /proc/meminfo),
// capped by the process's address-space limit (RLIMIT_AS, less what is
// already mapped) and by the memory limit of its cgroup (v2 memory.max, v1
// memory.limit_in_bytes, at every level up the hierarchy, less that level's
// usage): an allocation past either fails however much the machine has free,
// so a device in a container reports the container's memory, not the host's.
// Header-only, like the rest of the SDK; reads files on every call.
#ifndef BACKPLANE_PLUGIN_SDK_HOST_MEMORY_HPP
#define BACKPLANE_PLUGIN_SDK_HOST_MEMORY_HPP

#include <backplane/plugin_sdk/contract.hpp>

#include <sys/resource.h>
#include <sys/sysinfo.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace backplane::plugin_sdk {

inline constexpr std::uint64_t kNoMemoryLimit = std::numeric_limits<std::uint64_t>::max();

// What host_memory reads, so that a test can give a made-up /proc and /sys.
struct HostMemorySources {
  std::string root;                                    // prefix of /proc/... and /sys/...: "" is the machine's
  std::uint64_t address_space_limit = kNoMemoryLimit;  // RLIMIT_AS's soft limit
};

namespace detail::host_memory_files {

// The first number of a one-line file ("max" and anything unreadable: none).
inline std::optional<std::uint64_t> number_in(const std::string& path) {
  std::ifstream file(path);
  std::string word;
  if (!(file >> word) || word.empty() || word.find_first_not_of("0123456789") != std::string::npos) {
    return std::nullopt;
  }
  try {
    return std::stoull(word);
  } catch (const std::exception&) {
    return std::nullopt;  // past 64 bits: no limit a process could reach
  }
}

// `key` in a "Key:   N kB" file (meminfo, status), in bytes.
inline std::optional<std::uint64_t> kibibytes_field(const std::string& path, const std::string& key) {
  std::ifstream file(path);
  std::string line;
  const std::string prefix = key + ":";
  while (std::getline(file, line)) {
    if (!line.starts_with(prefix)) continue;
    unsigned long long kib = 0;
    if (std::sscanf(line.c_str() + prefix.size(), " %llu", &kib) == 1) return std::uint64_t{kib} * 1024;
  }
  return std::nullopt;
}

// A cgroup hierarchy this process is in: the directory of its group, and the
// mount point the walk up stops at.
struct CgroupDirectory {
  std::string group;
  std::string mount;
  bool v2 = false;
};

// From /proc/self/cgroup ("0::/path" for v2, "N:memory,...:/path" for v1's
// memory controller) and /proc/self/mountinfo (the hierarchy's mount point
// and the root it shows).
inline std::vector<CgroupDirectory> memory_cgroups(const std::string& root) {
  struct Membership {
    std::string path;
    bool v2;
  };
  std::vector<Membership> memberships;
  std::ifstream cgroup(root + "/proc/self/cgroup");
  std::string line;
  while (std::getline(cgroup, line)) {
    const auto first = line.find(':');
    const auto second = first == std::string::npos ? first : line.find(':', first + 1);
    if (second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    const std::string path = line.substr(second + 1);
    if (line.substr(0, first) == "0" && controllers.empty()) {
      memberships.push_back({path, true});
    } else if (("," + controllers + ",").find(",memory,") != std::string::npos) {
      memberships.push_back({path, false});
    }
  }
  std::vector<CgroupDirectory> directories;
  std::ifstream mountinfo(root + "/proc/self/mountinfo");
  while (std::getline(mountinfo, line)) {
    // id parent major:minor root mount-point options [tags] - type source super-options
    std::istringstream fields(line);
    std::string id, parent, device, mount_root, mount_point, word;
    fields >> id >> parent >> device >> mount_root >> mount_point;
    while (fields >> word && word != "-") {
    }
    std::string type, source, options;
    fields >> type >> source >> options;
    const bool v2 = type == "cgroup2";
    const bool v1_memory = type == "cgroup" && ("," + options + ",").find(",memory,") != std::string::npos;
    if (!v2 && !v1_memory) continue;
    for (const Membership& membership : memberships) {
      if (membership.v2 != v2) continue;
      // The group's path below the mount's root (a container's mount may show
      // only its own part of the hierarchy).
      std::string below = membership.path;
      if (mount_root != "/" && below.starts_with(mount_root)) below = below.substr(mount_root.size());
      std::string group = root + mount_point + (below == "/" ? "" : below);
      directories.push_back({group, root + mount_point, v2});
    }
  }
  return directories;
}

struct Cap {
  std::uint64_t total = kNoMemoryLimit;
  std::uint64_t free = kNoMemoryLimit;
};

// The tightest limit of the group and every group above it.
inline Cap cgroup_cap(const CgroupDirectory& directory) {
  Cap cap;
  std::string group = directory.group;
  while (true) {
    const auto limit = number_in(group + (directory.v2 ? "/memory.max" : "/memory.limit_in_bytes"));
    const auto usage = number_in(group + (directory.v2 ? "/memory.current" : "/memory.usage_in_bytes"));
    if (limit) {
      cap.total = std::min(cap.total, *limit);
      if (usage) cap.free = std::min(cap.free, *usage >= *limit ? 0 : *limit - *usage);
    }
    if (group.size() <= directory.mount.size()) break;
    const auto slash = group.rfind('/');
    if (slash == std::string::npos || slash < directory.mount.size()) break;
    group.resize(std::max(slash, directory.mount.size()));
  }
  return cap;
}

}  // namespace detail::host_memory_files

// This process's RLIMIT_AS, under the real /proc and /sys.
inline HostMemorySources host_memory_sources() {
  HostMemorySources sources;
  struct rlimit limit {};
  if (getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY)
    sources.address_space_limit = limit.rlim_cur;
  return sources;
}

// Total: the smallest of MemTotal, the address-space limit and every cgroup
// limit. Free: the smallest of MemAvailable, the address-space limit less
// VmSize (/proc/self/status), and every cgroup limit less its usage (0 when
// usage is past it). sysinfo() when /proc/meminfo is missing; free unknown
// when nothing answers; a total of 0 when nothing answers at all.
inline MemoryFigures host_memory(const HostMemorySources& sources) {
  using namespace detail::host_memory_files;
  MemoryFigures memory;
  const std::string meminfo = sources.root + "/proc/meminfo";
  std::optional<std::uint64_t> total = kibibytes_field(meminfo, "MemTotal");
  std::optional<std::uint64_t> free = kibibytes_field(meminfo, "MemAvailable");
  struct sysinfo info {};
  if (sources.root.empty() && (!total || !free) && sysinfo(&info) == 0) {
    if (!total) total = std::uint64_t{info.totalram} * info.mem_unit;
    if (!free) free = std::uint64_t{info.freeram} * info.mem_unit;
  }
  std::uint64_t total_cap = kNoMemoryLimit;
  std::uint64_t free_cap = kNoMemoryLimit;
  if (sources.address_space_limit != kNoMemoryLimit) {
    total_cap = sources.address_space_limit;
    const auto mapped = kibibytes_field(sources.root + "/proc/self/status", "VmSize");
    if (mapped) free_cap = *mapped >= total_cap ? 0 : total_cap - *mapped;
  }
  for (const CgroupDirectory& directory : memory_cgroups(sources.root)) {
    const Cap cap = cgroup_cap(directory);
    total_cap = std::min(total_cap, cap.total);
    free_cap = std::min(free_cap, cap.free);
  }
  memory.total = std::min(total.value_or(total_cap), total_cap);
  if (free)
    memory.free = std::min(*free, free_cap);
  else if (free_cap != kNoMemoryLimit)
    memory.free = free_cap;
  if (memory.total == kNoMemoryLimit) memory.total = 0;  // nothing answered
  return memory;
}

// This process's host memory, from the real /proc and /sys.
inline MemoryFigures host_memory() { return host_memory(host_memory_sources()); }

}  // namespace backplane::plugin_sdk

#endif  // BACKPLANE_PLUGIN_SDK_HOST_MEMORY_HPP
