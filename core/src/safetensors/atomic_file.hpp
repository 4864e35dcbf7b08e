// Writing a file so that readers see the old file or the whole new one, never
// a part: a temporary file in the same directory, flushed, then renamed.
#pragma once

#include <cstddef>
#include <filesystem>
#include <span>

namespace backplane::safetensors::detail {

class AtomicFile {
 public:
  // Creates the temporary file next to `target`, or next to the file it
  // names when `target` is a symlink (the link is kept, its file replaced).
  // The temporary gets the mode of the file it replaces, else 0666 less the
  // umask. Throws Error(kNotFound) when the directory does not exist,
  // Error(kInvalidArgument) when the file cannot be created there.
  explicit AtomicFile(const std::filesystem::path& target);
  // Removes the temporary file unless commit() succeeded.
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  // Throws Error(kIo) when the file system refuses (full disk, I/O error).
  void write(std::span<const std::byte> bytes);
  // Flushes to disk and renames over the target; throws as write() does.
  void commit();

 private:
  std::filesystem::path target_;
  std::filesystem::path temporary_;
  int fd_ = -1;
  bool committed_ = false;
};

}  // namespace backplane::safetensors::detail
