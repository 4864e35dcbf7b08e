#include "safetensors/atomic_file.hpp"

#include <backplane/error.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>

namespace backplane::safetensors::detail {
namespace {

[[noreturn]] void throw_io(const std::string& what, const std::filesystem::path& path) {
  throw Error(ErrorCode::kIo, what + " " + path.string() + " failed: " + std::strerror(errno));
}

// Where a save of `path` lands: a symlink is followed to the file it names
// (as writing through open() would), so the link stays a link. A dangling
// link resolves to the file it would create; a loop is left to open() to
// report.
std::filesystem::path follow_links(std::filesystem::path path) {
  constexpr int kMaxLinks = 40;  // the kernel's own limit (ELOOP)
  for (int hop = 0; hop < kMaxLinks; ++hop) {
    std::error_code error;
    if (!std::filesystem::is_symlink(std::filesystem::symlink_status(path, error))) return path;
    std::filesystem::path next = std::filesystem::read_symlink(path, error);
    if (error) return path;
    path = next.is_absolute() ? next : path.parent_path() / next;
  }
  return path;
}

}  // namespace

AtomicFile::AtomicFile(const std::filesystem::path& target) : target_(follow_links(target)) {
  std::filesystem::path directory = target_.parent_path();
  if (directory.empty()) directory = ".";
  // A replaced file keeps its permissions (a save must not widen or narrow who
  // may read the data); a new one gets 0666 less the umask.
  struct stat existing {};
  const bool replacing = ::stat(target_.c_str(), &existing) == 0 && S_ISREG(existing.st_mode);
  std::random_device random;
  // O_EXCL with a fresh random name: never clobbers another writer's
  // temporary. The name is short and independent of the target's, so a
  // target name near NAME_MAX still has room for it.
  for (int attempt = 0; attempt < 100; ++attempt) {
    char name[32];
    std::snprintf(name, sizeof name, ".backplane-%08x.tmp", static_cast<unsigned>(random()));
    std::filesystem::path candidate = directory / name;
    fd_ = ::open(candidate.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd_ >= 0) {
      if (replacing && ::fchmod(fd_, existing.st_mode & 07777) != 0) {
        const int error = errno;  // no destructor runs for a constructor that throws
        ::close(fd_);
        ::unlink(candidate.c_str());
        errno = error;
        throw_io("setting the mode of", candidate);
      }
      temporary_ = std::move(candidate);
      return;
    }
    if (errno != EEXIST) {
      int error = errno;
      throw Error(error == ENOENT || error == ENOTDIR ? ErrorCode::kNotFound : ErrorCode::kInvalidArgument,
                  "cannot create a file in " + directory.string() + " to write " + target_.string() + ": " +
                      std::strerror(error));
    }
  }
  throw Error(ErrorCode::kInvalidArgument, "cannot find a free temporary name next to " + target_.string());
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_ && !temporary_.empty()) ::unlink(temporary_.c_str());
}

void AtomicFile::write(std::span<const std::byte> bytes) {
  const std::byte* data = bytes.data();
  std::size_t left = bytes.size();
  while (left > 0) {
    ssize_t written = ::write(fd_, data, left);
    if (written < 0 && errno == EINTR) continue;
    if (written < 0) throw_io("writing", temporary_);
    data += written;
    left -= static_cast<std::size_t>(written);
  }
}

void AtomicFile::commit() {
  if (::fsync(fd_) != 0) throw_io("flushing", temporary_);
  int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) throw_io("closing", temporary_);
  if (::rename(temporary_.c_str(), target_.c_str()) != 0) throw_io("renaming the temporary file to", target_);
  committed_ = true;
  // Best effort: make the rename itself durable.
  std::filesystem::path directory = target_.parent_path();
  if (directory.empty()) directory = ".";
  int directory_fd = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (directory_fd >= 0) {
    ::fsync(directory_fd);
    ::close(directory_fd);
  }
}

}  // namespace backplane::safetensors::detail
