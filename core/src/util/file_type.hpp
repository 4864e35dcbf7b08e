// Names the kind of a file that is not a regular one, for messages that
// refuse it ("... is a FIFO (named pipe), not a regular file").
#pragma once

#include <sys/stat.h>

namespace backplane::detail {

inline const char* file_type_name(mode_t mode) noexcept {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "not a file";
}

}  // namespace backplane::detail
