// A safetensors file opened for loading: one descriptor, the validated
// header, and (for host-addressable devices) one read-only mapping of the
// whole file.
#pragma once

#include <backplane/safetensors.hpp>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>

namespace backplane::safetensors::detail {

class MappedFile {
 public:
  // Opens `path`, reads and validates its header (the 8-byte length and the
  // JSON, nothing else), then, with `map`, maps the whole file. Throws as
  // load() documents for opening and format errors.
  static std::shared_ptr<const MappedFile> open(const std::filesystem::path& path, bool map);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::string& name() const noexcept { return name_; }
  const Header& header() const noexcept { return header_; }
  // The whole file when opened with `map`, else nullptr.
  const std::byte* data() const noexcept { return base_; }
  std::uint64_t size() const noexcept { return size_; }
  // Files opened without `map` only (a mapped file has given its descriptor
  // up). Reads exactly `size` bytes at `offset` with pread (the streamed path reads
  // from the descriptor, not the mapping: no page-fault per 4 KiB, and the
  // kernel's sequential read-ahead). Throws Error(kIo) naming the file on a
  // failure or when the file ends early (it shrank after it was validated).
  void read(std::uint64_t offset, std::byte* destination, std::uint64_t size) const;
  // Tells the kernel that [offset, offset + size) will be read once, in order.
  void advise_sequential(std::uint64_t offset, std::uint64_t size) const noexcept;

 private:
  MappedFile() = default;
  Header read_header() const;

  std::string name_;
  int fd_ = -1;
  std::byte* base_ = nullptr;
  std::uint64_t size_ = 0;
  Header header_;
};

}  // namespace backplane::safetensors::detail
