#include "tokens/token_file.hpp"

#include "tokens/object_file.hpp"

#include "remote/object_url.hpp"
#include "util/page_advice.hpp"
#include "util/regular_file.hpp"

#include <backplane/error.hpp>

#include <fmt/format.h>

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace backplane::detail {

// A file's size is an off_t; mapping it whole needs a size_t as wide.
static_assert(sizeof(std::size_t) >= sizeof(std::uint64_t), "token files are mapped whole: 64-bit platforms only");

TokenFileMapping::TokenFileMapping(int fd, std::uint64_t size, const std::string& file) : size_(size) {
  void* base = ::mmap(nullptr, static_cast<std::size_t>(size), PROT_READ, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    const int error = errno;
    throw Error(error == ENOMEM ? ErrorCode::kOutOfMemory : ErrorCode::kIo,
                fmt::format("{}: cannot map the file ({} bytes): {}", file, size, mmap_failure_reason(error)));
  }
  base_ = static_cast<std::byte*>(base);
}

TokenFileMapping::~TokenFileMapping() { ::munmap(base_, static_cast<std::size_t>(size_)); }

TokenFile::TokenFile(const std::filesystem::path& path) : name_(path.string()) {
  if (is_object_url(name_)) {
    object_ = std::make_unique<ObjectFile>(name_);
    name_ = object_->name();
    size_ = object_->size();
    return;
  }
  struct stat status {};
  fd_ = detail::open_regular_file(path, status);
  size_ = static_cast<std::uint64_t>(status.st_size);
}

TokenFile::~TokenFile() {
  if (fd_ >= 0) ::close(fd_);
}

bool TokenFile::exists(const std::string& path) {
  if (is_object_url(path)) return object_exists(path);
  struct stat status {};
  return ::lstat(path.c_str(), &status) == 0;
}

std::span<const std::byte> TokenFile::prefix(std::uint64_t bytes) {
  const std::uint64_t wanted = std::min(bytes, size_);
  std::uint64_t done = prefix_.size();
  if (wanted <= done) return std::span<const std::byte>(prefix_).first(static_cast<std::size_t>(wanted));
  // A copy would be a second whole index in every process that opens it,
  // besides the page cache's.
  if (wanted > kLargestCopiedHeader) {
    if (mapped_header_ == nullptr) mapped_header_ = map();
    return {mapped_header_->data(), static_cast<std::size_t>(wanted)};
  }
  prefix_.resize(static_cast<std::size_t>(wanted));
  if (object_) {
    try {
      object_->read(done, std::span(prefix_).subspan(static_cast<std::size_t>(done)));
    } catch (...) {
      prefix_.resize(static_cast<std::size_t>(done));
      throw;
    }
    return prefix_;
  }
  while (done < wanted) {
    const ssize_t got =
        ::pread(fd_, prefix_.data() + done, static_cast<std::size_t>(wanted - done), static_cast<off_t>(done));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      const std::string why = got < 0 ? std::strerror(errno)
                                      : fmt::format(
                                            "the file ended at byte {}; it was {} bytes when opened (was it "
                                            "truncated meanwhile?)",
                                            done, size_);
      prefix_.resize(static_cast<std::size_t>(done));
      throw Error(ErrorCode::kIo, fmt::format("{}: reading the header failed: {}", name_, why));
    }
    done += static_cast<std::uint64_t>(got);
  }
  return prefix_;
}

bool TokenFile::is_mapped(std::span<const std::byte> bytes) const noexcept {
  // An object's copy is anonymous memory: a dropped page would read as zeros.
  if (object_ || mapped_header_ == nullptr || bytes.empty()) return false;
  const auto begin = reinterpret_cast<std::uintptr_t>(mapped_header_->data());
  const auto at = reinterpret_cast<std::uintptr_t>(bytes.data());
  return at >= begin && at - begin <= mapped_header_->size() && bytes.size() <= mapped_header_->size() - (at - begin);
}

std::shared_ptr<const TokenFileMapping> TokenFile::map() const {
  if (object_) return object_->download();
  return std::make_shared<const TokenFileMapping>(fd_, size_, name_);
}

}  // namespace backplane::detail
