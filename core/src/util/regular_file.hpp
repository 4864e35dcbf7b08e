// Opening a file for reading without trusting what the path names: the
// safetensors and token loaders, and `backplane trace summary`.
#pragma once

#include <sys/stat.h>

#include <filesystem>

namespace backplane::detail {

// Opens `path` read-only and returns the descriptor (the caller closes it),
// with its fstat in `status`. Anything but a regular file is refused without
// waiting on it: a FIFO's plain open() blocks until a writer appears, and a
// device or socket is not a file of bytes to parse. Throws Error(kNotFound)
// when the path does not exist, Error(kInvalidArgument) "<path> is a FIFO
// (named pipe), not a regular file" (or the type found) and for open errors.
int open_regular_file(const std::filesystem::path& path, struct stat& status);

}  // namespace backplane::detail
