// One token file opened for load_tokens: one descriptor, its first bytes
// read with pread (a file that shrinks meanwhile is an error, not a SIGBUS),
// then one read-only shared mapping of the whole file. A header longer than
// kLargestCopiedHeader (a Megatron index is all header: 1.9 GB for 10^8
// sequences) is read through a mapping instead of copied; like the tokens'
// mapping, it faults (SIGBUS) if the file is cut short while it is read.
// A path that is an object URL (s3://, http://, https://) is an ObjectFile
// instead: its first bytes come from ranged GETs, and its mapping is the
// object read into memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace backplane::detail {

class ObjectFile;

// The whole file mapped PROT_READ, MAP_SHARED: the pages are the page
// cache's, shared by every process reading the file, and nothing is ever
// written back. Unmapped when the last owner (the arrays over it) is gone.
class TokenFileMapping {
 public:
  TokenFileMapping(int fd, std::uint64_t size, const std::string& file);
  // Adopts `size` bytes that mmap gave (an object read into anonymous
  // memory): unmapped with the rest.
  TokenFileMapping(std::byte* base, std::uint64_t size) noexcept : base_(base), size_(size) {}
  ~TokenFileMapping();
  TokenFileMapping(const TokenFileMapping&) = delete;
  TokenFileMapping& operator=(const TokenFileMapping&) = delete;

  const std::byte* data() const noexcept { return base_; }
  std::uint64_t size() const noexcept { return size_; }

 private:
  std::byte* base_ = nullptr;
  std::uint64_t size_ = 0;
};

class TokenFile {
 public:
  // Opens `path` read-only (O_CLOEXEC) and checks it is a regular file.
  // Throws Error(kNotFound) when it does not exist, Error(kInvalidArgument)
  // when it is not a regular file or cannot be opened. For an object URL,
  // one HEAD request (ObjectFile).
  explicit TokenFile(const std::filesystem::path& path);
  ~TokenFile();
  TokenFile(const TokenFile&) = delete;
  TokenFile& operator=(const TokenFile&) = delete;

  const std::string& name() const noexcept { return name_; }
  std::uint64_t size() const noexcept { return size_; }

  static constexpr std::uint64_t kLargestCopiedHeader = std::uint64_t{1} << 20;

  // The first min(bytes, size()) bytes, read once and kept (a later, longer
  // request reads only the rest); past kLargestCopiedHeader, a view of a
  // mapping of the file, kept until the TokenFile goes. Throws Error(kIo)
  // naming the file when a read fails or the file ends early, and map()'s
  // errors.
  std::span<const std::byte> prefix(std::uint64_t bytes);
  // Whether `bytes` (from prefix()) lie in that mapping: shared and
  // read-only, so its pages may be dropped once read.
  bool is_mapped(std::span<const std::byte> bytes) const noexcept;

  // Maps the whole file (size() > 0). Throws Error(kOutOfMemory) or
  // Error(kIo) naming the file when mmap fails. An object is read whole
  // into memory.
  std::shared_ptr<const TokenFileMapping> map() const;

  // Whether `path` names an existing file (lstat) or object (HEAD).
  static bool exists(const std::string& path);

 private:
  std::string name_;
  std::unique_ptr<ObjectFile> object_;  // set for an object URL, with fd_ -1
  int fd_ = -1;
  std::uint64_t size_ = 0;
  std::vector<std::byte> prefix_;
  std::shared_ptr<const TokenFileMapping> mapped_header_;  // a header past kLargestCopiedHeader
};

}  // namespace backplane::detail
