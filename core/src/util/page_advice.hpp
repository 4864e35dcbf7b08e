// Page-level advice about host memory that may be a file mapping: what the
// batch stream uses to read cold token files concurrently and to keep the
// process's resident memory bounded. Every call is best effort where the
// kernel only takes a hint, and says so.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace backplane::detail {

struct HostRange {
  const std::byte* address = nullptr;
  std::uint64_t size = 0;
};

// The process's mappings as /proc/self/maps listed them when read: one read
// answers for any number of ranges (a stream over thousands of token files
// reads the file once, not once per file).
class MemoryMappings {
 public:
  // Reads /proc/self/maps; no mappings where it cannot be read (then no
  // range is releasable).
  static MemoryMappings of_this_process();

  // The rule of release_pages: true when every page of `range` lies in a
  // shared mapping ('s' in /proc/self/maps: MAP_SHARED, of a file or of
  // shared memory). Such a mapping's pages belong to the file or the shared
  // object, not to this process: dropping them loses nothing, and a later
  // read brings back what the memory held, written bytes included. A private
  // mapping is never releasable, even one read-only now: a page it ever
  // wrote (before an mprotect, say) is the process's own copy, and dropping
  // it would bring back the file's old bytes. O(log mappings).
  bool pages_are_releasable(HostRange range) const noexcept;

  // How many mappings the process had (proc(5): one line each), for the
  // error that names vm.max_map_count.
  std::size_t count() const noexcept { return entries_.size(); }

 private:
  struct Entry {
    std::uintptr_t begin = 0;
    std::uintptr_t end = 0;
    bool shared = false;
  };
  std::vector<Entry> entries_;  // sorted by address, as the kernel lists them
};

// madvise over the pages that `range` touches; a hint, errors ignored.
// Random: no read-ahead around each fault (a window needs only its pages).
void advise_random(HostRange range) noexcept;
// Start reading these pages in now, without waiting for them.
void advise_will_need(HostRange range) noexcept;
// Unmap the pages around `range` from the process, in whole aligned 2 MiB
// blocks clipped to the pages of `mapped`: the kernel may map a file in
// folios up to that size (one fault, one PMD), and dropping 4 KiB of one
// leaves the rest resident. They are read again, from the page cache or the
// file, when touched. `mapped` (which holds `range`) must have passed
// MemoryMappings::pages_are_releasable(): on other memory this would throw
// data away.
void drop_pages(HostRange range, HostRange mapped) noexcept;

// Resident bytes (the Rss of /proc/self/smaps) of the mappings that hold any
// of `ranges`, each mapping counted once. 0 where /proc cannot be read.
// Reading smaps costs milliseconds (the kernel walks every page table):
// call it when asked, never per step.
std::uint64_t resident_bytes(std::span<const HostRange> ranges);

// The kernel's limit on mappings per process (/proc/sys/vm/max_map_count),
// or 0 where it cannot be read.
std::uint64_t max_map_count() noexcept;

// Why mmap failed with `error` (an errno), for a message: strerror's words,
// or, for an ENOMEM while the process holds as many mappings as
// vm.max_map_count allows, that limit and the count, and what to do (each
// mapped file is one mapping: 70,000 token files pass the default 65,530).
std::string mmap_failure_reason(int error);

}  // namespace backplane::detail
