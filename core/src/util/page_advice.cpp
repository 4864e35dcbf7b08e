#include "util/page_advice.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <string>

namespace backplane::detail {
namespace {

std::uintptr_t page_size() noexcept {
  static const auto size = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  return size;
}

// The range's pages, for madvise (which wants a page-aligned start).
void advise(HostRange range, int advice) noexcept {
  if (range.address == nullptr || range.size == 0) return;
  const std::uintptr_t page = page_size();
  const auto begin = reinterpret_cast<std::uintptr_t>(range.address) & ~(page - 1);
  const auto end = reinterpret_cast<std::uintptr_t>(range.address) + range.size;
  (void)madvise(reinterpret_cast<void*>(begin), end - begin, advice);
}

struct MapsLine {
  std::uintptr_t begin = 0;
  std::uintptr_t end = 0;
  std::string permissions;
  std::uint64_t inode = 0;
};

// "begin-end perms offset dev inode path" (proc(5)).
bool parse_maps_line(const std::string& line, MapsLine& out) {
  char permissions[8] = {};
  unsigned long long begin = 0, end = 0, offset = 0, inode = 0;
  unsigned major = 0, minor = 0;
  if (std::sscanf(line.c_str(), "%llx-%llx %7s %llx %x:%x %llu", &begin, &end, permissions, &offset, &major, &minor,
                  &inode) != 7) {
    return false;
  }
  out = {static_cast<std::uintptr_t>(begin), static_cast<std::uintptr_t>(end), permissions, inode};
  return true;
}

}  // namespace

bool is_droppable_file_mapping(HostRange range) {
  std::ifstream maps("/proc/self/maps");
  if (!maps) return false;
  auto next = reinterpret_cast<std::uintptr_t>(range.address);
  const std::uintptr_t end = next + range.size;
  std::string line;
  MapsLine entry;
  // Lines are sorted by address: walk them, requiring contiguous coverage.
  while (next < end && std::getline(maps, line)) {
    if (!parse_maps_line(line, entry) || entry.end <= next) continue;
    if (entry.begin > next) return false;  // a hole, or not mapped at all
    const bool shared = entry.permissions.size() >= 4 && entry.permissions[3] == 's';
    const bool writable = entry.permissions.size() >= 2 && entry.permissions[1] == 'w';
    if (entry.inode == 0 || (!shared && writable)) return false;
    next = entry.end;
  }
  return next >= end;
}

void advise_random(HostRange range) noexcept { advise(range, MADV_RANDOM); }
void advise_will_need(HostRange range) noexcept { advise(range, MADV_WILLNEED); }
void drop_pages(HostRange range, HostRange mapped) noexcept {
  constexpr std::uintptr_t kBlock = std::uintptr_t{2} << 20;
  const std::uintptr_t page = page_size();
  // Every page that holds a byte of `mapped` is in its (droppable) mapping.
  const auto lowest = reinterpret_cast<std::uintptr_t>(mapped.address) & ~(page - 1);
  const auto highest = (reinterpret_cast<std::uintptr_t>(mapped.address) + mapped.size + page - 1) & ~(page - 1);
  const auto begin = std::max(lowest, reinterpret_cast<std::uintptr_t>(range.address) & ~(kBlock - 1));
  const auto end =
      std::min(highest, (reinterpret_cast<std::uintptr_t>(range.address) + range.size + kBlock - 1) & ~(kBlock - 1));
  if (begin < end) (void)madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

std::uint64_t resident_bytes(std::span<const HostRange> ranges) {
  std::ifstream smaps("/proc/self/smaps");
  if (!smaps) return 0;
  std::uint64_t total = 0;
  bool counting = false;
  std::string line;
  MapsLine entry;
  while (std::getline(smaps, line)) {
    if (parse_maps_line(line, entry)) {
      counting = false;
      for (const HostRange& range : ranges) {
        const auto begin = reinterpret_cast<std::uintptr_t>(range.address);
        if (begin < entry.end && begin + range.size > entry.begin) counting = true;
      }
      continue;
    }
    unsigned long long kilobytes = 0;
    if (counting && std::sscanf(line.c_str(), "Rss: %llu kB", &kilobytes) == 1) total += kilobytes * 1024;
  }
  return total;
}

}  // namespace backplane::detail
