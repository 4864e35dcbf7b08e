// The release rule of util/page_advice: which memory may have its pages
// dropped without changing what it holds, read from one snapshot of
// /proc/self/maps.
#include "util/page_advice.hpp"

#include "support/temp_dir.hpp"

#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

using namespace backplane::detail;
using backplane::testing::TempDir;

namespace {

constexpr std::size_t kPage = 4096;

// A file of `pages` pages of 'f' bytes, mapped with `flags` and `protection`.
struct FileMapping {
  FileMapping(const TempDir& directory, std::size_t pages, int protection, int flags) : size(pages * kPage) {
    const std::string path = (directory / "mapped.bin").string();
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    REQUIRE(fd >= 0);
    const std::string bytes(size, 'f');
    REQUIRE(::write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()));
    void* mapped = ::mmap(nullptr, size, protection, flags, fd, 0);
    ::close(fd);
    REQUIRE(mapped != MAP_FAILED);
    base = static_cast<std::byte*>(mapped);
  }
  ~FileMapping() { ::munmap(base, size); }
  FileMapping(const FileMapping&) = delete;
  FileMapping& operator=(const FileMapping&) = delete;
  HostRange range() const { return {base, size}; }

  std::byte* base = nullptr;
  std::size_t size = 0;
};

bool releasable(HostRange range) { return MemoryMappings::of_this_process().pages_are_releasable(range); }

}  // namespace

TEST_CASE("[util] a shared file mapping is releasable, read-only or writable, whole or in part") {
  TempDir directory;
  const FileMapping read_only(directory, 4, PROT_READ, MAP_SHARED);
  CHECK(releasable(read_only.range()));
  CHECK(releasable({read_only.base + 100, 3 * kPage}));
  const FileMapping writable(directory, 4, PROT_READ | PROT_WRITE, MAP_SHARED);
  writable.base[5] = std::byte{'w'};  // the write is the file's: dropping the page keeps it
  CHECK(releasable(writable.range()));
}

TEST_CASE("[util] a private mapping is never releasable, even read-only, and a modified page shows why") {
  TempDir directory;
  FileMapping mapping(directory, 4, PROT_READ | PROT_WRITE, MAP_PRIVATE);
  mapping.base[kPage + 7] = std::byte{'m'};  // a copy-on-write page: only this process holds it
  REQUIRE(::mprotect(mapping.base, mapping.size, PROT_READ) == 0);
  CHECK_FALSE(releasable(mapping.range()));
  CHECK_FALSE(releasable({mapping.base + kPage, 1}));
  // What releasing would do: the modification goes, the file's byte comes back.
  REQUIRE(::madvise(mapping.base, mapping.size, MADV_DONTNEED) == 0);
  CHECK(mapping.base[kPage + 7] == std::byte{'f'});

  const FileMapping untouched(directory, 2, PROT_READ, MAP_PRIVATE);
  CHECK_FALSE(releasable(untouched.range()));  // a later mprotect and write would be lost the same way
}

TEST_CASE("[util] heap memory, a hole and an empty range are not releasable") {
  const auto heap = std::make_unique<std::byte[]>(1 << 20);
  CHECK_FALSE(releasable({heap.get(), 1 << 20}));
  CHECK_FALSE(releasable({nullptr, 0}));

  // Three shared anonymous pages, the middle one unmapped: a hole.
  void* mapped = ::mmap(nullptr, 3 * kPage, PROT_READ, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  REQUIRE(mapped != MAP_FAILED);
  auto* base = static_cast<std::byte*>(mapped);
  CHECK(releasable({base, 3 * kPage}));  // shared memory keeps its pages too
  REQUIRE(::munmap(base + kPage, kPage) == 0);
  CHECK(releasable({base, kPage}));
  CHECK_FALSE(releasable({base, 3 * kPage}));
  CHECK_FALSE(releasable({base + kPage, 1}));
  ::munmap(base, kPage);
  ::munmap(base + 2 * kPage, kPage);
}

TEST_CASE("[util] one snapshot answers for many ranges and counts the mappings") {
  const std::size_t before = MemoryMappings::of_this_process().count();
  std::vector<void*> mappings;
  for (int index = 0; index < 300; ++index) {
    void* mapped = ::mmap(nullptr, kPage, PROT_READ, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    REQUIRE(mapped != MAP_FAILED);
    mappings.push_back(mapped);
  }
  const MemoryMappings snapshot = MemoryMappings::of_this_process();
  CHECK(snapshot.count() >= before + 300);
  for (void* mapped : mappings) CHECK(snapshot.pages_are_releasable({static_cast<std::byte*>(mapped), kPage}));
  for (void* mapped : mappings) ::munmap(mapped, kPage);
  CHECK(max_map_count() > 0);
}
