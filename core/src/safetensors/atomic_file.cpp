#include "safetensors/atomic_file.hpp"

#include <backplane/error.hpp>

#include <fcntl.h>
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

}  // namespace

AtomicFile::AtomicFile(std::filesystem::path target) : target_(std::move(target)) {
  std::filesystem::path directory = target_.parent_path();
  if (directory.empty()) directory = ".";
  std::random_device random;
  // O_EXCL with a fresh random name: never clobbers another writer's temporary.
  for (int attempt = 0; attempt < 100; ++attempt) {
    char suffix[32];
    std::snprintf(suffix, sizeof suffix, ".tmp-%08x", static_cast<unsigned>(random()));
    std::filesystem::path candidate = directory / (target_.filename().string() + suffix);
    fd_ = ::open(candidate.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd_ >= 0) {
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
