// Opening a file for load(): one descriptor for the header, then the mapping
// (host-addressable devices) or the streamed path's preads.
#include "safetensors/mapped_file.hpp"

#include "safetensors/header_frame.hpp"
#include "util/page_advice.hpp"
#include "util/regular_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

namespace backplane::safetensors::detail {
namespace {

std::string errno_text(int error) { return std::strerror(error); }

}  // namespace

std::shared_ptr<const MappedFile> MappedFile::open(const std::filesystem::path& path, bool map) {
  std::shared_ptr<MappedFile> file(new MappedFile());
  file->name_ = path.string();
  struct stat status {};
  file->fd_ = ::backplane::detail::open_regular_file(path, status);
  file->size_ = static_cast<std::uint64_t>(status.st_size);
  file->header_ = file->read_header();
  if (!map) return file;

  // MAP_PRIVATE over the page cache: nothing is copied and processes loading
  // the same file share its pages, yet a consumer that writes (PyTorch through
  // DLPack, which cannot be told memory is read-only) gets a private copy of
  // that page instead of a SIGSEGV; the file never changes. MAP_NORESERVE: a
  // 19 GiB file must not be charged against swap for pages never written. Mapped after the
  // header is read (with pread, not through the mapping): loading touches no
  // page of the mapping at all. No madvise: the access pattern belongs to the
  // caller (random windows over a token file, or one pass over weights), and
  // the kernel's default read-around suits both.
  void* base = ::mmap(nullptr, static_cast<std::size_t>(file->size_), PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_NORESERVE, file->fd_, 0);
  if (base == MAP_FAILED) {
    const int error = errno;
    throw Error(error == ENOMEM ? ErrorCode::kOutOfMemory : ErrorCode::kIo,
                "cannot map " + file->name_ + " (" + std::to_string(file->size_) +
                    " bytes): " + backplane::detail::mmap_failure_reason(error));
  }
  file->base_ = static_cast<std::byte*>(base);
  // The mapping holds its own reference to the file.
  ::close(file->fd_);
  file->fd_ = -1;
  return file;
}

Header MappedFile::read_header() const {
  // One read covers the length and a typical header; a larger header is
  // read once its length has passed the size checks (as read_header() does).
  constexpr std::uint64_t kFirstRead = 4096;
  std::vector<std::byte> prefix(static_cast<std::size_t>(std::min(size_, kFirstRead)));
  read(0, prefix.data(), prefix.size());
  const HeaderFrame frame = frame_header(prefix, size_);
  if (!frame.broken && frame.end > prefix.size()) {
    const std::size_t have = prefix.size();
    prefix.resize(static_cast<std::size_t>(frame.end));
    read(have, prefix.data() + have, prefix.size() - have);
  }
  return parse_header(prefix, size_, name_);
}

MappedFile::~MappedFile() {
  if (base_ != nullptr) ::munmap(base_, static_cast<std::size_t>(size_));
  if (fd_ >= 0) ::close(fd_);
}

void MappedFile::read(std::uint64_t offset, std::byte* destination, std::uint64_t size) const {
  std::uint64_t done = 0;
  while (done < size) {
    const ssize_t got =
        ::pread(fd_, destination + done, static_cast<std::size_t>(size - done), static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      throw Error(ErrorCode::kIo, name_ + ": read of " + std::to_string(size - done) + " bytes at offset " +
                                      std::to_string(offset + done) + " failed: " + errno_text(errno));
    }
    if (got == 0) {
      throw Error(ErrorCode::kIo, name_ + ": the file ended at byte " + std::to_string(offset + done) +
                                      " while loading; it was " + std::to_string(size_) +
                                      " bytes when opened (was it truncated or rewritten in place?)");
    }
    done += static_cast<std::uint64_t>(got);
  }
}

void MappedFile::advise_sequential(std::uint64_t offset, std::uint64_t size) const noexcept {
  (void)::posix_fadvise(fd_, static_cast<off_t>(offset), static_cast<off_t>(size), POSIX_FADV_SEQUENTIAL);
}

}  // namespace backplane::safetensors::detail
