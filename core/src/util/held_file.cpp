#include "util/held_file.hpp"

#include "util/file_type.hpp"
#include "util/fork.hpp"
#include "util/trust.hpp"

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <utility>

namespace backplane::detail {
namespace {

constexpr std::string_view kDescriptorPrefix = "/proc/self/fd/";
// Held descriptors are numbered from here: a child the probe helper starts
// has 0 to 3 set up afresh, and a held one must keep its number there.
constexpr int kLowestHeld = 10;

struct HeldFiles {
  ForkSafeMutex mutex;
  std::map<std::pair<dev_t, ino_t>, int> by_file;  // guarded by mutex
  std::set<int> descriptors;                       // guarded by mutex
};
// Never destroyed: the descriptors outlive every static.
HeldFiles& held_files = *new HeldFiles;

struct Descriptor {
  int fd;
  ~Descriptor() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

std::variant<HeldFile, std::string> hold_trusted_file(const std::filesystem::path& file) {
  // O_NONBLOCK: a FIFO put there since the caller looked must not block us.
  Descriptor opened{::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)};
  if (opened.fd < 0) return fmt::format("cannot open {}: {}", file.string(), std::strerror(errno));
  struct stat status {};
  if (::fstat(opened.fd, &status) != 0) return fmt::format("cannot open {}: {}", file.string(), std::strerror(errno));
  if (!S_ISREG(status.st_mode)) {
    return fmt::format("{} is {}, not a regular file", file.string(), file_type_name(status.st_mode));
  }
  // Judged after the open: whatever the path named before, the file judged
  // is the one opened only if the path still names it now.
  if (auto problem = untrusted_path(file)) return std::move(*problem);
  struct stat now {};
  if (::stat(file.c_str(), &now) != 0 || now.st_dev != status.st_dev || now.st_ino != status.st_ino) {
    return fmt::format(
        "refused: {} changed while it was checked (the file opened is not the one its path names "
        "now); try again once nothing replaces it",
        file.string());
  }
  const std::lock_guard lock(held_files.mutex);
  auto [entry, added] = held_files.by_file.try_emplace({status.st_dev, status.st_ino}, -1);
  if (added) {
    entry->second = ::fcntl(opened.fd, F_DUPFD_CLOEXEC, kLowestHeld);
    if (entry->second < 0) {
      const int error = errno;
      held_files.by_file.erase(entry);
      return fmt::format("cannot open {}: {}", file.string(), std::strerror(error));
    }
    held_files.descriptors.insert(entry->second);
  }
  return HeldFile{entry->second, fmt::format("{}{}", kDescriptorPrefix, entry->second)};
}

std::optional<int> held_descriptor(std::string_view path) {
  if (!path.starts_with(kDescriptorPrefix)) return std::nullopt;
  const std::string_view digits = path.substr(kDescriptorPrefix.size());
  int descriptor = -1;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), descriptor);
  if (error != std::errc{} || end != digits.data() + digits.size() || digits != std::to_string(descriptor)) {
    return std::nullopt;
  }
  const std::lock_guard lock(held_files.mutex);
  if (held_files.descriptors.count(descriptor) == 0) return std::nullopt;
  return descriptor;
}

}  // namespace backplane::detail
