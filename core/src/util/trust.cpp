#include "util/trust.hpp"

#include <fmt/format.h>

#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <vector>

namespace backplane::detail {
namespace {

// "root", or the running user's name ("uid N" without one), for chown.
std::string running_user() {
  const uid_t uid = ::geteuid();
  if (uid == 0) return "root";
  struct passwd entry {};
  struct passwd* found = nullptr;
  std::vector<char> buffer(16384);
  if (::getpwuid_r(uid, &entry, buffer.data(), buffer.size(), &found) == 0 && found != nullptr) {
    return found->pw_name;
  }
  return std::to_string(uid);
}

std::string owner_name(uid_t uid) {
  struct passwd entry {};
  struct passwd* found = nullptr;
  std::vector<char> buffer(16384);
  if (::getpwuid_r(uid, &entry, buffer.data(), buffer.size(), &found) == 0 && found != nullptr) {
    return fmt::format("uid {} ({})", uid, found->pw_name);
  }
  return fmt::format("uid {}", uid);
}

// Whether a user other than `owner` has `gid` as primary group: a member
// that the group database does not list. Reads the password database
// (getpwent is one enumeration per process: serialised here).
bool primary_group_of_another(gid_t gid, uid_t owner) {
  static std::mutex enumeration;
  const std::lock_guard lock(enumeration);
  std::vector<char> buffer(16384);
  struct passwd entry {};
  struct passwd* found = nullptr;
  bool another = false;
  ::setpwent();
  while (!another && ::getpwent_r(&entry, buffer.data(), buffer.size(), &found) == 0 && found != nullptr) {
    another = entry.pw_gid == gid && entry.pw_uid != owner;
  }
  ::endpwent();
  return another;
}

// A user private group (Debian's default with umask 002): the owner's
// primary group, with no other member, listed in the group database or
// holding it as primary group. Writable by it adds nobody, so it counts as
// not group-writable, as in Debian's OpenSSH. Never group 0: root's group
// has members by primary group on every system (daemon accounts).
bool private_group_of_owner(gid_t gid, uid_t owner) {
  if (gid == 0) return false;
  std::vector<char> buffer(16384);
  struct passwd user {};
  struct passwd* found_user = nullptr;
  if (::getpwuid_r(owner, &user, buffer.data(), buffer.size(), &found_user) != 0 || found_user == nullptr ||
      user.pw_gid != gid) {
    return false;
  }
  const std::string owner_login = user.pw_name;
  std::vector<char> group_buffer(65536);
  struct group group {};
  struct group* found_group = nullptr;
  if (::getgrgid_r(gid, &group, group_buffer.data(), group_buffer.size(), &found_group) != 0 ||
      found_group == nullptr) {
    return false;
  }
  for (char** member = group.gr_mem; member != nullptr && *member != nullptr; ++member) {
    if (owner_login != *member) return false;
  }
  return !primary_group_of_another(gid, owner);
}

// `role`: "" for the file itself, else how the directory relates to it.
std::optional<std::string> check_one(const std::filesystem::path& path, const std::string& role) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) return std::nullopt;  // a missing file is the loader's error to report
  const std::string name = role.empty() ? path.string() : fmt::format("{} {}", role, path.string());
  const uid_t owner = info.st_uid;
  if (owner != 0 && owner != ::geteuid()) {
    return fmt::format(
        "refused: {} is owned by {}, neither root nor the user running this ({}), who could "
        "change it; run chown {} {}",
        name, owner_name(owner), running_user(), running_user(), path.string());
  }
  const bool sticky_root_directory = S_ISDIR(info.st_mode) && (info.st_mode & S_ISVTX) != 0 && owner == 0;
  if ((info.st_mode & S_IWOTH) != 0 && !sticky_root_directory) {
    return fmt::format("refused: {} is world-writable (anyone could {}); run chmod o-w {}", name,
                       role.empty() ? "replace it" : "add or swap what it holds", path.string());
  }
  if ((info.st_mode & S_IWGRP) != 0 && !sticky_root_directory && !private_group_of_owner(info.st_gid, owner)) {
    return fmt::format("refused: {} is writable by its group (gid {}), whose members could {}; run chmod g-w {}", name,
                       info.st_gid, role.empty() ? "replace it" : "add or swap what it holds", path.string());
  }
  return std::nullopt;
}

// `directory`, then each directory above it up to /, the first named by
// `role` and the others by `above`.
std::optional<std::string> check_directories(std::filesystem::path directory, std::string role,
                                             const std::string& above) {
  for (;;) {
    if (auto problem = check_one(directory, role)) return problem;
    if (directory == directory.root_path() || directory.empty()) break;
    directory = directory.parent_path();
    role = above;
  }
  return std::nullopt;
}

// The file, then each directory above it up to /.
std::optional<std::string> check_chain(const std::filesystem::path& file) {
  if (auto problem = check_one(file, "")) return problem;
  return check_directories(file.parent_path(), "its directory", "its ancestor directory");
}

// The kernel's own bound on the links one lookup follows (MAXSYMLINKS).
constexpr int kMaxLinks = 40;

// Where an absolute path leads once every link is followed, walked one
// component at a time as the kernel walks it, with each symlink met at any
// hop (a link to a link included, which a stat of the path alone never
// shows).
struct Walk {
  std::filesystem::path target;
  std::optional<std::string> problem;  // a link the protected_symlinks rule does not follow
  // Each link's directory and the link: judged like the file's directory.
  std::vector<std::pair<std::filesystem::path, std::filesystem::path>> link_directories;
};

Walk walk_links(const std::filesystem::path& file) {
  Walk walk;
  std::vector<std::string> pending;  // components still to walk, the next one last
  const auto push = [&pending](const std::filesystem::path& path) {
    std::vector<std::string> parts;
    for (const auto& part : path.relative_path()) parts.push_back(part.string());
    pending.insert(pending.end(), parts.rbegin(), parts.rend());
  };
  push(file);
  std::filesystem::path resolved = "/";
  int links = 0;
  while (!pending.empty()) {
    const std::string name = std::move(pending.back());
    pending.pop_back();
    if (name.empty() || name == ".") continue;
    if (name == "..") {
      resolved = resolved.parent_path();
      continue;
    }
    std::filesystem::path next = resolved / name;
    struct stat link {};
    // A missing component is the loader's to report; the walk goes on by name.
    if (::lstat(next.c_str(), &link) != 0 || !S_ISLNK(link.st_mode)) {
      resolved = std::move(next);
      continue;
    }
    std::error_code error;
    const std::filesystem::path points_to = std::filesystem::read_symlink(next, error);
    if (error || ++links > kMaxLinks) {  // the open fails too (ELOOP), and says so
      walk.target = next;
      return walk;
    }
    struct stat directory {};
    if (::stat(resolved.c_str(), &directory) == 0 && !link_may_be_followed(directory, link)) {
      walk.problem = fmt::format(
          "refused: {} is a symlink in the sticky world-writable directory {} and belongs to {}, neither the user "
          "running this ({}) nor the directory's owner, who could re-point it at another file at any time (the "
          "kernel's protected_symlinks rule, which backplane follows whether or not the kernel does); name the "
          "file it leads to ({}) instead",
          next.string(), resolved.string(), owner_name(link.st_uid), running_user(), points_to.string());
      return walk;
    }
    walk.link_directories.emplace_back(resolved, next);
    if (points_to.is_absolute()) resolved = "/";
    push(points_to);
  }
  walk.target = resolved;
  return walk;
}

}  // namespace

bool link_may_be_followed(const struct stat& directory, const struct stat& link) noexcept {
  const bool sticky_world_writable = (directory.st_mode & S_ISVTX) != 0 && (directory.st_mode & S_IWOTH) != 0;
  return !sticky_world_writable || link.st_uid == ::geteuid() || link.st_uid == directory.st_uid;
}

std::optional<std::string> untrusted_path(const std::filesystem::path& given) {
  std::error_code error;
  const std::filesystem::path absolute = std::filesystem::absolute(given, error);
  const std::filesystem::path file = absolute.lexically_normal();
  // The path as given: the kernel takes a ".." after a link from where the link led.
  Walk walk = walk_links(error ? file : absolute);
  if (walk.problem) return walk.problem;
  if (walk.target != file) {
    if (auto problem = check_chain(walk.target)) return problem;
  }
  if (auto problem = check_chain(file)) return problem;
  // A link's directory off both chains (a link to a link) could swap the link.
  for (const auto& [directory, link] : walk.link_directories) {
    if (auto problem = check_directories(directory, fmt::format("the directory of the symlink {},", link.string()),
                                         fmt::format("an ancestor directory of the symlink {},", link.string()))) {
      return problem;
    }
  }
  return std::nullopt;
}

}  // namespace backplane::detail
