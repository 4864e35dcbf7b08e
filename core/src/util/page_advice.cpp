#include "util/page_advice.hpp"

#include <fmt/format.h>

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
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
  out = {static_cast<std::uintptr_t>(begin), static_cast<std::uintptr_t>(end), permissions};
  return true;
}

}  // namespace

MemoryMappings MemoryMappings::of_this_process() {
  MemoryMappings mappings;
  std::ifstream maps("/proc/self/maps");
  std::string line;
  MapsLine entry;
  while (std::getline(maps, line)) {
    if (!parse_maps_line(line, entry)) continue;
    const bool shared = entry.permissions.size() >= 4 && entry.permissions[3] == 's';
    mappings.entries_.push_back({entry.begin, entry.end, shared});
  }
  return mappings;
}

bool MemoryMappings::pages_are_releasable(HostRange range) const noexcept {
  if (range.size == 0) return false;
  auto next = reinterpret_cast<std::uintptr_t>(range.address);
  const std::uintptr_t end = next + range.size;
  // The first mapping that ends past the range's start; then the range must
  // be covered without a hole, by shared mappings only.
  auto entry = std::upper_bound(entries_.begin(), entries_.end(), next,
                                [](std::uintptr_t address, const Entry& candidate) { return address < candidate.end; });
  for (; next < end; ++entry) {
    if (entry == entries_.end() || entry->begin > next || !entry->shared) return false;
    next = entry->end;
  }
  return true;
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

std::string mmap_failure_reason(int error) {
  const std::string words = std::strerror(error);
  if (error != ENOMEM) return words;
  const std::uint64_t limit = max_map_count();
  const std::size_t count = MemoryMappings::of_this_process().count();
  // A new mapping fails once the count reaches the limit (it may also split
  // one, needing two).
  if (limit == 0 || count + 2 < limit) return words;
  return fmt::format(
      "{}: the process has {} memory mappings, at the kernel's limit vm.max_map_count = {} (each "
      "mapped file takes one); raise the limit (sysctl -w vm.max_map_count={}, as root) or use fewer, "
      "larger files",
      words, count, limit, std::max<std::uint64_t>(limit * 4, 262144));
}

std::uint64_t max_map_count() noexcept {
  std::FILE* file = std::fopen("/proc/sys/vm/max_map_count", "re");
  if (file == nullptr) return 0;
  unsigned long long limit = 0;
  const bool read = std::fscanf(file, "%llu", &limit) == 1;
  std::fclose(file);
  return read ? limit : 0;
}

}  // namespace backplane::detail
