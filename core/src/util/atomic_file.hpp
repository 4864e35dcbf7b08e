// Writing a file so that readers see the old file or the whole new one, never
// a part (safetensors saves, trace files), and a killed writer leaves nothing behind: the data goes into an
// unnamed temporary file in the target's directory (O_TMPFILE), which is
// linked under a temporary name and renamed over the target only once it is
// complete and flushed. Every step names the directory by a descriptor, so a
// name that changes meanwhile cannot redirect the write.
//
// Links: a symlink target is followed (the link stays a link, its file is
// replaced), one hop at a time, applying the kernel's protected_symlinks
// rule ourselves (following it by hand bypasses the kernel's): a link in a
// sticky world-writable directory (/tmp) is followed only when it belongs
// to the caller or to the directory's owner.
//
// Special files: a target that exists and is not a regular file (a FIFO, a
// socket, a device, a directory) is refused, as the loaders refuse to read
// one: renaming over it would silently replace it.
//
// Leftovers: where the file system has no O_TMPFILE the temporary is named
// from the start; its name records this boot and the writer's pid, and the
// next save into that directory removes temporaries whose writer on this
// machine is gone, or (written elsewhere) untouched for a day.
#pragma once

#include <cstddef>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>

namespace backplane::detail {

class AtomicFile {
 public:
  // Opens the target's directory and the temporary file in it. The file
  // gets the mode of the file it replaces, else 0666 less the umask.
  // `purpose` completes the messages ("cannot <purpose> to FILE: ...").
  // Throws Error(kNotFound) when the directory does not exist,
  // Error(kInvalidArgument) when the file cannot be created there, the
  // target is not a regular file ("FILE is a FIFO (named pipe), not a
  // regular file") or a link on the way may not be followed (naming the link
  // and its owner).
  explicit AtomicFile(const std::filesystem::path& target, std::string_view purpose = "save");
  // Discards the temporary file unless commit() succeeded.
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  // Throws Error(kIo) when the file system refuses (full disk, I/O error).
  void write(std::span<const std::byte> bytes);
  // Renames over the target; throws as write() does. `durable`: flushes the
  // data to disk first (fsync) and the rename after, so that a machine that
  // loses power keeps the old file or the whole new one; without it a crash
  // of the machine (not of the process) may leave a partial file under the
  // target's name, for a save several times faster on a slow disk.
  void commit(bool durable = true);

 private:
  // The final target, for messages, and the directory holding it, which a
  // later chdir() or rename of a directory on the way does not change.
  std::filesystem::path shown_;
  int directory_ = -1;     // the target's directory
  std::string name_;       // the target's name in it
  std::string temporary_;  // the temporary's name; empty while it has none (O_TMPFILE)
  int fd_ = -1;
  bool committed_ = false;
};

}  // namespace backplane::detail
