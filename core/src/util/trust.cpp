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

// The file, then each directory above it up to /.
std::optional<std::string> check_chain(const std::filesystem::path& file) {
  if (auto problem = check_one(file, "")) return problem;
  std::filesystem::path directory = file.parent_path();
  std::string role = "its directory";
  for (;;) {
    if (auto problem = check_one(directory, role)) return problem;
    if (directory == directory.root_path() || directory.empty()) break;
    directory = directory.parent_path();
    role = "its ancestor directory";
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> untrusted_path(const std::filesystem::path& given) {
  std::error_code error;
  const std::filesystem::path file = std::filesystem::absolute(given, error).lexically_normal();
  if (auto target = std::filesystem::canonical(file, error); !error && target != file) {
    if (auto problem = check_chain(target)) return problem;
  }
  return check_chain(file);
}

}  // namespace backplane::detail
