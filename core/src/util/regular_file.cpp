#include "util/regular_file.hpp"

#include "util/file_type.hpp"

#include <backplane/error.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace backplane::detail {

int open_regular_file(const std::filesystem::path& path, struct stat& status) {
  const std::string name = path.string();
  // O_NONBLOCK: open() of a FIFO returns at once instead of waiting for a
  // writer; for a regular file it changes nothing (reads never block on one).
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    const int error = errno;
    throw Error(error == ENOENT || error == ENOTDIR ? ErrorCode::kNotFound : ErrorCode::kInvalidArgument,
                "cannot open " + name + ": " + std::strerror(error));
  }
  if (::fstat(fd, &status) != 0) {
    const int error = errno;
    ::close(fd);
    throw Error(ErrorCode::kInvalidArgument, "cannot stat " + name + ": " + std::strerror(error));
  }
  if (!S_ISREG(status.st_mode)) {
    ::close(fd);
    throw Error(ErrorCode::kInvalidArgument, name + " is " + file_type_name(status.st_mode) + ", not a regular file");
  }
  return fd;
}

}  // namespace backplane::detail
