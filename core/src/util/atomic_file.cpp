#include "util/atomic_file.hpp"

#include "util/file_type.hpp"
#include "util/trust.hpp"

#include <backplane/error.hpp>

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <utility>

namespace backplane::detail {
namespace {

constexpr int kMaxLinks = 40;  // the kernel's own limit (ELOOP)
constexpr const char* kPrefix = ".backplane-";
constexpr const char* kSuffix = ".tmp";
// A temporary written on another machine (a shared file system) whose writer
// cannot be asked is stale once it has not changed for this long.
constexpr auto kForeignStaleAfter = std::chrono::hours(24);

[[noreturn]] void throw_io(const std::string& what, const std::filesystem::path& path) {
  throw Error(ErrorCode::kIo, what + " " + path.string() + " failed: " + std::strerror(errno));
}

// The first 8 hex digits of this boot's id: temporaries named with it were
// written on this machine since it booted, so their writer's pid means
// something here.
const std::string& boot_tag() {
  static const std::string tag = [] {
    std::ifstream file("/proc/sys/kernel/random/boot_id");
    std::string id;
    std::getline(file, id);
    std::string hex;
    for (const char c : id) {
      if (std::isxdigit(static_cast<unsigned char>(c)) != 0) hex += c;
      if (hex.size() == 8) break;
    }
    return hex.size() == 8 ? hex : std::string("00000000");
  }();
  return tag;
}

class Descriptor {
 public:
  explicit Descriptor(int fd = -1) : fd_(fd) {}
  ~Descriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  int get() const { return fd_; }
  void reset(int fd) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_;
};

// Opens the directory part of `path` (the kernel follows links there, with
// its own rules).
int open_directory(const std::filesystem::path& path, const std::filesystem::path& shown) {
  std::filesystem::path directory = path.parent_path();
  if (directory.empty()) directory = ".";
  const int fd = ::open(directory.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    const int error = errno;
    throw Error(error == ENOENT || error == ENOTDIR ? ErrorCode::kNotFound : ErrorCode::kInvalidArgument,
                fmt::format("cannot open the directory {} to write {}: {}", directory.string(), shown.string(),
                            std::strerror(error)));
  }
  return fd;
}

// The kernel's protected_symlinks rule, for a link we follow ourselves.
void check_link_may_be_followed(int directory, const struct stat& link, const std::filesystem::path& where,
                                std::string_view purpose) {
  struct stat info {};
  if (::fstat(directory, &info) != 0) return;
  if (link_may_be_followed(info, link)) return;
  throw Error(ErrorCode::kInvalidArgument,
              fmt::format("refusing to {} through the symlink {}: it lies in a sticky world-writable directory "
                          "and belongs to uid {}, neither you nor the directory's owner (the kernel's "
                          "protected_symlinks rule, which backplane follows too)",
                          purpose, where.string(), link.st_uid));
}

// Removes temporaries of ours whose writer is gone: on this boot, a pid that
// no longer exists; written elsewhere, untouched for kForeignStaleAfter.
void remove_stale_temporaries(int directory) {
  const int listing_fd = ::openat(directory, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (listing_fd < 0) return;
  DIR* listing = ::fdopendir(listing_fd);
  if (listing == nullptr) {
    ::close(listing_fd);
    return;
  }
  const auto now = std::chrono::system_clock::now();
  while (const dirent* entry = ::readdir(listing)) {
    const std::string name = entry->d_name;
    const std::size_t prefix = std::strlen(kPrefix);
    if (name.rfind(kPrefix, 0) != 0 || name.size() < prefix + 4 || name.substr(name.size() - 4) != kSuffix) continue;
    // .backplane-<boot>-<pid>-<random>.tmp
    char boot[9] = {};
    long pid = 0;
    unsigned random = 0;
    if (std::sscanf(name.c_str() + prefix, "%8[0-9a-f]-%ld-%8x", boot, &pid, &random) != 3) continue;
    struct stat info {};
    if (::fstatat(directory, name.c_str(), &info, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(info.st_mode)) continue;
    if (info.st_uid != ::geteuid()) continue;  // another user's: not ours to judge
    bool stale = false;
    if (boot == boot_tag()) {
      stale = pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
    } else {
      const auto modified = std::chrono::system_clock::from_time_t(info.st_mtime);
      stale = now - modified > kForeignStaleAfter;
    }
    if (stale) ::unlinkat(directory, name.c_str(), 0);
  }
  ::closedir(listing);
}

std::string temporary_name() {
  static thread_local std::mt19937 random{std::random_device{}()};
  return fmt::format("{}{}-{}-{:08x}{}", kPrefix, boot_tag(), ::getpid(), random(), kSuffix);
}

// The longest name temporary_name() can give, in any process (a pid of up
// to 10 digits).
std::size_t longest_temporary_name() {
  return fmt::format("{}{}-{}-{:08x}{}", kPrefix, boot_tag(), INT32_MAX, 0U, kSuffix).size();
}

}  // namespace

AtomicFile::AtomicFile(const std::filesystem::path& target, std::string_view purpose) {
  // Follow links one hop at a time, each name looked up in a directory we
  // hold open; a dangling link resolves to the file it would create.
  std::filesystem::path path = target;
  Descriptor directory(open_directory(path, target));
  for (int hop = 0;; ++hop) {
    const std::string name = path.filename().string();
    struct stat info {};
    if (name.empty() || ::fstatat(directory.get(), name.c_str(), &info, AT_SYMLINK_NOFOLLOW) != 0 ||
        !S_ISLNK(info.st_mode)) {
      name_ = name;
      break;
    }
    if (hop == kMaxLinks) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("cannot {} to {}: more than {} symlinks to follow", purpose, target.string(), kMaxLinks));
    }
    check_link_may_be_followed(directory.get(), info, path, purpose);
    std::string next(static_cast<std::size_t>(info.st_size) + 1, '\0');
    const ssize_t length = ::readlinkat(directory.get(), name.c_str(), next.data(), next.size());
    if (length < 0 || static_cast<std::size_t>(length) >= next.size()) {
      name_ = name;  // changed under us: write the name itself, as open() would
      break;
    }
    next.resize(static_cast<std::size_t>(length));
    const std::filesystem::path link(next);
    if (link.is_absolute()) {
      path = link;
      directory.reset(open_directory(path, target));
    } else {
      path = path.parent_path() / link;
      // Relative to the link's directory, which we hold.
      std::filesystem::path sub = link.parent_path();
      if (!sub.empty()) {
        const int fd = ::openat(directory.get(), sub.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0) {
          throw Error(errno == ENOENT || errno == ENOTDIR ? ErrorCode::kNotFound : ErrorCode::kInvalidArgument,
                      fmt::format("cannot open the directory {} to write {}: {}", path.parent_path().string(),
                                  target.string(), std::strerror(errno)));
        }
        directory.reset(fd);
      }
    }
  }
  shown_ = path;
  if (name_.empty() || name_ == "." || name_ == "..") {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("cannot {} to {}: it names a directory", purpose, target.string()));
  }
  // A real directory descriptor (O_PATH ones cannot be listed or synced).
  const int real = ::openat(directory.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (real < 0) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("cannot open the directory of {} to write it: {}", shown_.string(), std::strerror(errno)));
  }
  directory_ = real;
  // Both names the writer creates must fit the file system's limit on one
  // name, checked now: a trace is written only at its stop, a save only
  // after its data, and a rename refused then ("File name too long") would
  // lose all of it.
  const long name_max = ::fpathconf(directory_, _PC_NAME_MAX);
  const std::size_t limit = name_max > 0 ? static_cast<std::size_t>(name_max) : NAME_MAX;
  if (name_.size() > limit || longest_temporary_name() > limit) {
    ::close(std::exchange(directory_, -1));
    const bool own = name_.size() > limit;
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("cannot {} to {}: {} is {} bytes, longer than the {} bytes (NAME_MAX) its file system "
                            "allows in one name",
                            purpose, shown_.string(), own ? "its file name" : "the temporary file's name beside it",
                            own ? name_.size() : longest_temporary_name(), limit));
  }
  remove_stale_temporaries(directory_);

  // A replaced file keeps its permissions (replacing must not widen or narrow
  // who may read the data); a new one gets 0666 less the umask.
  struct stat existing {};
  const bool replacing = ::fstatat(directory_, name_.c_str(), &existing, AT_SYMLINK_NOFOLLOW) == 0;
  if (replacing && !S_ISREG(existing.st_mode)) {
    ::close(std::exchange(directory_, -1));
    throw Error(ErrorCode::kInvalidArgument, fmt::format("cannot {} to {}: it is {}, not a regular file", purpose,
                                                         shown_.string(), file_type_name(existing.st_mode)));
  }
  fd_ = ::openat(directory_, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666);
  if (fd_ < 0) {
    // No O_TMPFILE here: a named temporary, O_EXCL with a fresh name.
    for (int attempt = 0; attempt < 100 && fd_ < 0; ++attempt) {
      temporary_ = temporary_name();
      fd_ = ::openat(directory_, temporary_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
      if (fd_ < 0 && errno != EEXIST) break;
    }
    if (fd_ < 0) {
      const int error = errno;
      ::close(std::exchange(directory_, -1));
      throw Error(
          error == ENOENT || error == ENOTDIR ? ErrorCode::kNotFound : ErrorCode::kInvalidArgument,
          fmt::format("cannot create a file next to {} to write it: {}", shown_.string(), std::strerror(error)));
    }
  }
  if (replacing && ::fchmod(fd_, existing.st_mode & 07777) != 0) {
    const int error = errno;  // no destructor runs for a constructor that throws
    ::close(std::exchange(fd_, -1));
    if (!temporary_.empty()) ::unlinkat(directory_, temporary_.c_str(), 0);
    ::close(std::exchange(directory_, -1));
    errno = error;
    throw_io("setting the mode of the new", shown_);
  }
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);  // an unnamed temporary disappears with it
  if (!committed_ && !temporary_.empty() && directory_ >= 0) ::unlinkat(directory_, temporary_.c_str(), 0);
  if (directory_ >= 0) ::close(directory_);
}

void AtomicFile::write(std::span<const std::byte> bytes) {
  const std::byte* data = bytes.data();
  std::size_t left = bytes.size();
  while (left > 0) {
    ssize_t written = ::write(fd_, data, left);
    if (written < 0 && errno == EINTR) continue;
    if (written < 0) throw_io("writing the new", shown_);
    data += written;
    left -= static_cast<std::size_t>(written);
  }
}

void AtomicFile::commit(bool durable) {
  if (durable && ::fsync(fd_) != 0) throw_io("flushing the new", shown_);
  if (temporary_.empty()) {
    // Give the unnamed file a name only now that it is whole. linkat through
    // /proc needs no privilege (AT_EMPTY_PATH would).
    const std::string self = fmt::format("/proc/self/fd/{}", fd_);
    for (int attempt = 0; attempt < 100; ++attempt) {
      temporary_ = temporary_name();
      if (::linkat(AT_FDCWD, self.c_str(), directory_, temporary_.c_str(), AT_SYMLINK_FOLLOW) == 0) break;
      if (errno != EEXIST) {
        temporary_.clear();
        throw_io("linking the new", shown_);
      }
    }
  }
  const int fd = std::exchange(fd_, -1);
  if (::close(fd) != 0) throw_io("closing the new", shown_);
  if (::renameat(directory_, temporary_.c_str(), directory_, name_.c_str()) != 0) {
    throw_io("renaming the temporary file to", shown_);
  }
  committed_ = true;
  if (durable) ::fsync(directory_);  // best effort: make the rename itself durable
}

}  // namespace backplane::detail
