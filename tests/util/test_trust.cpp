// The trust rule for plugin files and the config file (ssh's StrictModes,
// sudo): the file, its directory and every ancestor owned by root or the
// running user and not writable by group or others, except root-owned sticky
// directories. Each refusal names the path and the command that fixes it.
#include "support/fork_child.hpp"
#include "support/temp_dir.hpp"

#include "config/config.hpp"
#include "util/trust.hpp"

#include <backplane/backplane.hpp>

#include <doctest/doctest.h>

#include <pwd.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

using backplane::BackendInfo;
using backplane::BackendStatus;
using backplane::Runtime;
using backplane::testing::TempDir;

namespace {

const std::filesystem::path kPluginDir = BP_TEST_PLUGIN_DIR;
constexpr gid_t kOtherGroup = 12345;  // no user's private group
constexpr uid_t kOtherUser = 12345;

// `dir`/`sub`/backplane-cpu.so, every level 0755 and in a group of its own.
std::filesystem::path plugin_in(const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir);
  auto copy = dir / "backplane-cpu.so";
  std::filesystem::copy_file(kPluginDir / "backplane-cpu.so", copy);
  ::chmod(copy.c_str(), 0755);
  return copy;
}

BackendInfo cpu_found_in(const std::filesystem::path& path) {
  Runtime::Options options;
  options.plugin_paths = {path};
  options.ignore_environment = true;
  options.skip_default_paths = true;
  Runtime runtime(options);
  const BackendInfo* info = runtime.find_backend("cpu");
  REQUIRE(info != nullptr);
  return *info;
}

// Files made by the tests stay out of group-writable modes; a group other
// than the owner's private one makes a group-writable bit count.
void give_to_other_group(const std::filesystem::path& path) {
  REQUIRE(::chown(path.c_str(), static_cast<uid_t>(-1), kOtherGroup) == 0);
}

}  // namespace

TEST_CASE("[trust] the build tree and /tmp are trusted") {
  CHECK(backplane::detail::untrusted_path(kPluginDir / "backplane-cpu.so") == std::nullopt);
  TempDir dir;
  CHECK(cpu_found_in(plugin_in(dir / "plugins")).status == BackendStatus::kAvailable);
}

TEST_CASE("[trust] a group-writable plugin file is refused with the chmod that fixes it") {
  if (::geteuid() != 0) return;  // chgrp to a group we are not in needs root
  TempDir dir;
  auto file = plugin_in(dir / "plugins");
  give_to_other_group(file);
  ::chmod(file.c_str(), 0775);
  BackendInfo cpu = cpu_found_in(file.parent_path());
  CHECK(cpu.status == BackendStatus::kFailed);
  CHECK(cpu.reason == "refused: " + file.string() +
                          " is writable by its group (gid 12345), whose members could "
                          "replace it; run chmod g-w " +
                          file.string());
}

TEST_CASE("[trust] a plugin in a group-writable directory is refused") {
  if (::geteuid() != 0) return;
  TempDir dir;
  auto file = plugin_in(dir / "plugins");
  give_to_other_group(file.parent_path());
  ::chmod(file.parent_path().c_str(), 0775);
  BackendInfo cpu = cpu_found_in(file.parent_path());
  CHECK(cpu.status == BackendStatus::kFailed);
  CHECK(cpu.reason == "refused: its directory " + file.parent_path().string() +
                          " is writable by its group (gid "
                          "12345), whose members could add or swap what it holds; run chmod g-w " +
                          file.parent_path().string());
}

TEST_CASE("[trust] a plugin in a directory owned by another user is refused with the chown that fixes it") {
  if (::geteuid() != 0) return;  // only root can give a directory away
  TempDir dir;
  auto file = plugin_in(dir / "theirs" / "plugins");
  const auto theirs = dir / "theirs";
  REQUIRE(::chown(theirs.c_str(), kOtherUser, static_cast<gid_t>(-1)) == 0);
  BackendInfo cpu = cpu_found_in(file.parent_path());
  CHECK(cpu.status == BackendStatus::kFailed);
  CHECK(cpu.reason == "refused: its ancestor directory " + theirs.string() +
                          " is owned by uid 12345, neither "
                          "root nor the user running this (root), who could change it; run chown root " +
                          theirs.string());
}

TEST_CASE("[trust] a world-writable ancestor without the sticky bit is refused") {
  TempDir dir;
  auto file = plugin_in(dir / "open" / "plugins");
  ::chmod((dir / "open").c_str(), 0777);
  BackendInfo cpu = cpu_found_in(file);
  CHECK(cpu.status == BackendStatus::kFailed);
  CHECK(cpu.reason == "refused: its ancestor directory " + (dir / "open").string() +
                          " is world-writable (anyone could add or swap what it holds); run chmod o-w " +
                          (dir / "open").string());
}

TEST_CASE("[trust] a world-writable sticky directory is trusted only when root owns it") {
  TempDir dir;
  auto file = plugin_in(dir / "shared" / "plugins");
  ::chmod((dir / "shared").c_str(), 01777);
  CHECK(cpu_found_in(file).status == (::geteuid() == 0 ? BackendStatus::kAvailable : BackendStatus::kFailed));
  if (::geteuid() != 0) return;
  REQUIRE(::chown((dir / "shared").c_str(), kOtherUser, static_cast<gid_t>(-1)) == 0);
  CHECK(cpu_found_in(file).reason.find("is owned by uid 12345") != std::string::npos);
}

TEST_CASE("[trust] a symlink is checked where it leads, too") {
  if (::geteuid() != 0) return;
  TempDir dir;
  auto file = plugin_in(dir / "unsafe");
  give_to_other_group(dir / "unsafe");
  ::chmod((dir / "unsafe").c_str(), 0775);
  std::filesystem::create_directories(dir / "safe");
  std::filesystem::create_symlink(file, dir / "safe" / "backplane-cpu.so");
  BackendInfo cpu = cpu_found_in(dir / "safe");
  CHECK(cpu.status == BackendStatus::kFailed);
  CHECK(cpu.reason.find("its directory " + (dir / "unsafe").string() + " is writable by its group") !=
        std::string::npos);
}

TEST_CASE("[trust] a config file others can write is refused, naming the path and the fix") {
  TempDir dir;
  auto config = dir.write("config.toml", "plugin_paths = [\"/opt/plugins\"]\n");
  ::chmod(config.c_str(), 0666);
  auto environment = backplane::detail::Environment::fixed({{"BACKPLANE_CONFIG", config.string()}});
  try {
    backplane::detail::load_config(environment, "/nonexistent");
    FAIL("expected an error");
  } catch (const backplane::Error& error) {
    CHECK(error.code() == backplane::ErrorCode::kConfig);
    CHECK(std::string(error.what()) ==
          "config file BACKPLANE_CONFIG=" + config.string() + ": refused: " + config.string() +
              " is world-writable (anyone could replace it); run chmod o-w " + config.string() +
              " (it names plugin directories, whose code runs in this process)");
  }
  ::chmod(config.c_str(), 0644);
  CHECK(backplane::detail::load_config(environment, "/nonexistent").plugin_paths.size() == 1);
}

TEST_CASE("[trust] a config file in a group-writable directory is refused through the runtime") {
  if (::geteuid() != 0) return;
  TempDir dir;
  auto config = dir.write("conf/config.toml", "backends = [\"cpu\"]\n");
  give_to_other_group(dir / "conf");
  ::chmod((dir / "conf").c_str(), 0775);
  Runtime::Options options;
  options.config_file = config;
  options.skip_default_paths = true;
  Runtime runtime(options);
  try {
    runtime.backends();
    FAIL("expected an error");
  } catch (const backplane::Error& error) {
    CHECK(std::string(error.what())
              .find("refused: its directory " + (dir / "conf").string() + " is writable by its group (gid 12345)") !=
          std::string::npos);
    CHECK(std::string(error.what()).find("run chmod g-w " + (dir / "conf").string()) != std::string::npos);
  }
}

TEST_CASE("[trust] a plugin file writable by group 0 is refused: root's group has unlisted members") {
  if (::geteuid() != 0) {
    MESSAGE("skipped: needs root for a root-owned file in group 0");
    return;
  }
  TempDir dir;
  auto file = plugin_in(dir / "plugins");
  REQUIRE(::chown(file.c_str(), 0, 0) == 0);
  ::chmod(file.c_str(), 0775);
  BackendInfo cpu = cpu_found_in(file.parent_path());
  CHECK(cpu.status == BackendStatus::kFailed);
  CHECK(cpu.reason == "refused: " + file.string() +
                          " is writable by its group (gid 0), whose members could replace it; run chmod g-w " +
                          file.string());
}

TEST_CASE("[trust] a user's private group counts only without other members, primary-group ones included") {
  if (::geteuid() != 0 || ::access("/usr/sbin/useradd", X_OK) != 0) {
    MESSAGE("skipped: needs root and useradd to make the two accounts");
    return;
  }
  // Owner: an account with its private group; then a second account whose
  // primary group is that group (a member /etc/group does not list).
  const std::string owner = "bptrust" + std::to_string(::getpid());
  const std::string other = owner + "b";
  REQUIRE(std::system(("/usr/sbin/useradd -M -U -s /usr/sbin/nologin " + owner).c_str()) == 0);
  struct Cleanup {
    std::string owner, other;
    ~Cleanup() {
      (void)std::system(("/usr/sbin/userdel " + other + " 2>/dev/null").c_str());
      (void)std::system(("/usr/sbin/userdel " + owner + " 2>/dev/null").c_str());
      (void)std::system(("/usr/sbin/groupdel " + owner + " 2>/dev/null").c_str());
    }
  } cleanup{owner, other};
  const struct passwd* account = ::getpwnam(owner.c_str());
  REQUIRE(account != nullptr);
  const uid_t uid = account->pw_uid;
  const gid_t gid = account->pw_gid;
  TempDir dir;
  ::chmod(dir.path().c_str(), 0755);  // the owner must reach the file to judge it
  const auto file = plugin_in(dir / "plugins");
  REQUIRE(::chown(file.parent_path().c_str(), uid, gid) == 0);
  REQUIRE(::chown(file.c_str(), uid, gid) == 0);
  ::chmod(file.c_str(), 0775);
  // Checked as the owner would run it: in a child that becomes that user.
  const auto verdict_as_owner = [&] {
    const auto outcome = backplane::testing::run_forked([&]() -> std::string {
      if (::setgid(gid) != 0 || ::setuid(uid) != 0) return "setuid failed";
      const auto problem = backplane::detail::untrusted_path(file);
      return problem ? *problem : "trusted";
    });
    return outcome.report;
  };
  CHECK(verdict_as_owner() == "trusted");
  ::chmod(file.c_str(), 0755);
  CHECK(verdict_as_owner() == "trusted");
  ::chmod(file.c_str(), 0775);
  REQUIRE(std::system(("/usr/sbin/useradd -M -g " + owner + " -s /usr/sbin/nologin " + other).c_str()) == 0);
  const std::string refused = verdict_as_owner();
  CAPTURE(refused);
  CHECK(refused.find("is writable by its group (gid " + std::to_string(gid) + ")") != std::string::npos);
}

// The kernel's protected_symlinks rule, applied whether or not the kernel
// enforces it: another user's link in /tmp could be re-pointed between the
// judgement and the dlopen.
TEST_CASE("[trust] a plugin reached through another user's link in a sticky world-writable directory is refused") {
  if (::geteuid() != 0) {
    MESSAGE("skipped: needs root to give a link to another user");
    return;
  }
  TempDir dir;
  const auto file = plugin_in(dir / "plugins");
  const auto shared = dir / "tmp";
  std::filesystem::create_directory(shared);
  ::chmod(shared.c_str(), 01777);
  const auto link = shared / "backplane-cpu.so";
  std::filesystem::create_symlink(file, link);
  CHECK(cpu_found_in(link).status == BackendStatus::kAvailable);  // root's own link is followed
  REQUIRE(::lchown(link.c_str(), kOtherUser, static_cast<gid_t>(-1)) == 0);
  BackendInfo cpu = cpu_found_in(link);
  CHECK(cpu.status == BackendStatus::kFailed);
  CHECK(cpu.reason == "refused: " + link.string() + " is a symlink in the sticky world-writable directory " +
                          shared.string() +
                          " and belongs to uid 12345, neither the user running this (root) nor the directory's "
                          "owner, who could re-point it at another file at any time (the kernel's "
                          "protected_symlinks rule, which backplane follows whether or not the kernel does); name "
                          "the file it leads to (" +
                          file.string() + ") instead");
  // A link to that link: every hop is judged, not only the name given and the end.
  const auto outer = dir / "plugins2" / "backplane-cpu.so";
  std::filesystem::create_directories(outer.parent_path());
  std::filesystem::create_symlink(link, outer);
  CHECK(cpu_found_in(outer).reason == cpu.reason);
}

TEST_CASE("[trust] a link to a link whose directory others can write is refused, naming that directory") {
  TempDir dir;
  const auto file = plugin_in(dir / "plugins");
  const auto open = dir / "open";
  std::filesystem::create_directory(open);
  ::chmod(open.c_str(), 0777);  // not sticky: anyone may replace the link in it
  std::filesystem::create_symlink(file, open / "middle.so");
  const auto named = dir / "safe" / "backplane-cpu.so";
  std::filesystem::create_directories(named.parent_path());
  std::filesystem::create_symlink(open / "middle.so", named);
  BackendInfo cpu = cpu_found_in(named);
  CHECK(cpu.status == BackendStatus::kFailed);
  CHECK(cpu.reason == "refused: the directory of the symlink " + (open / "middle.so").string() + ", " + open.string() +
                          " is world-writable (anyone could add or swap what it holds); run chmod o-w " +
                          open.string());
}
