// Page-level advice about host memory that may be a file mapping: what the
// batch stream uses to read cold token files concurrently and to keep the
// process's resident memory bounded. Every call is best effort where the
// kernel only takes a hint, and says so.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace backplane::detail {

struct HostRange {
  const std::byte* address = nullptr;
  std::uint64_t size = 0;
};

// True when every page of `range` belongs to a mapping of a file that gives
// the same bytes back after its pages are dropped: a shared mapping, or a
// private one without write access (no copy-on-write page can hold data the
// file lacks). Reads /proc/self/maps; false where that cannot be read.
bool is_droppable_file_mapping(HostRange range);

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
// is_droppable_file_mapping(): on other memory this would zero the data.
void drop_pages(HostRange range, HostRange mapped) noexcept;

// Resident bytes (the Rss of /proc/self/smaps) of the mappings that hold any
// of `ranges`, each mapping counted once. 0 where /proc cannot be read.
std::uint64_t resident_bytes(std::span<const HostRange> ranges);

}  // namespace backplane::detail
