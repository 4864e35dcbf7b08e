#include "host_memory.hpp"

#include <sys/resource.h>
#include <sys/sysinfo.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace backplane::cpu {
namespace {

// The first number of a one-line file ("max" and anything unreadable: none).
std::optional<std::uint64_t> number_in(const std::string& path) {
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
std::optional<std::uint64_t> kibibytes_field(const std::string& path, const std::string& key) {
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
std::vector<CgroupDirectory> memory_cgroups(const std::string& root) {
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
  std::uint64_t total = kNoLimit;
  std::uint64_t free = kNoLimit;
};

// The tightest limit of the group and every group above it.
Cap cgroup_cap(const CgroupDirectory& directory) {
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

}  // namespace

HostMemorySources this_process() {
  HostMemorySources sources;
  struct rlimit limit {};
  if (getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY)
    sources.address_space_limit = limit.rlim_cur;
  return sources;
}

sdk::MemoryFigures host_memory(const HostMemorySources& sources) {
  sdk::MemoryFigures memory;
  const std::string meminfo = sources.root + "/proc/meminfo";
  std::optional<std::uint64_t> total = kibibytes_field(meminfo, "MemTotal");
  std::optional<std::uint64_t> free = kibibytes_field(meminfo, "MemAvailable");
  struct sysinfo info {};
  if (sources.root.empty() && (!total || !free) && sysinfo(&info) == 0) {
    if (!total) total = std::uint64_t{info.totalram} * info.mem_unit;
    if (!free) free = std::uint64_t{info.freeram} * info.mem_unit;
  }
  std::uint64_t total_cap = kNoLimit;
  std::uint64_t free_cap = kNoLimit;
  if (sources.address_space_limit != kNoLimit) {
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
  else if (free_cap != kNoLimit)
    memory.free = free_cap;
  if (memory.total == kNoLimit) memory.total = 0;  // nothing answered
  return memory;
}

}  // namespace backplane::cpu
