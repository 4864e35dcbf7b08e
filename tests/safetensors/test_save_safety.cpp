// save() against a hostile directory and a killed writer: links planted in
// /tmp-like directories, SIGKILL at random points, stale temporaries.
#include "support/errors.hpp"
#include "support/temp_dir.hpp"

#include <backplane/safetensors.hpp>

#include <doctest/doctest.h>

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

using namespace backplane;
using namespace backplane::testing;
namespace st = backplane::safetensors;
namespace fs = std::filesystem;

namespace {

void save_bytes(const fs::path& path, const std::vector<std::byte>& data, const std::string& name = "t") {
  const st::HostTensor tensor{{name, "U8", {data.size()}}, data};
  st::save(path, std::span(&tensor, 1));
}

std::vector<std::string> names_in(const fs::path& directory) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(directory)) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::string boot_tag() {
  std::ifstream file("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(file, id);
  std::string hex;
  for (const char c : id) {
    if (std::isxdigit(static_cast<unsigned char>(c)) != 0 && hex.size() < 8) hex += c;
  }
  return hex;
}

}  // namespace

TEST_CASE("[safetensors] save refuses a link planted by another user in a sticky world-writable directory") {
  if (::geteuid() != 0) {
    MESSAGE("skipped: needs root to give a link to another user");
    return;
  }
  TempDir dir;
  const fs::path shared = dir / "tmp";
  fs::create_directory(shared);
  ::chmod(shared.c_str(), 01777);  // like /tmp, owned by us
  const fs::path victim = dir / "victim.safetensors";
  save_bytes(victim, std::vector<std::byte>(16, std::byte{1}));
  const auto before = fs::file_size(victim);

  fs::create_symlink(victim, shared / "planted.safetensors");
  REQUIRE(::lchown((shared / "planted.safetensors").c_str(), 65534, 65534) == 0);  // nobody's link
  const Error error = error_from([&] { save_bytes(shared / "planted.safetensors", std::vector<std::byte>(99)); });
  CHECK(error.code() == ErrorCode::kInvalidArgument);
  CHECK(contains(error.what(), "refusing to save through the symlink"));
  CHECK(contains(error.what(), "planted.safetensors"));
  CHECK(contains(error.what(), "uid 65534"));
  CHECK(fs::file_size(victim) == before);
  CHECK(names_in(shared) == std::vector<std::string>{"planted.safetensors"});

  // The directory owner's own link (and ours) is followed, as the kernel would.
  fs::create_symlink(victim, shared / "own.safetensors");
  save_bytes(shared / "own.safetensors", std::vector<std::byte>(99, std::byte{2}));
  CHECK(fs::is_symlink(fs::symlink_status(shared / "own.safetensors")));
  CHECK(st::read_header(victim).tensors.at(0).byte_size() == 99);
}

TEST_CASE("[safetensors] SIGKILL at random points of large saves leaves the old file whole and no garbage") {
  TempDir dir;
  const fs::path path = dir / "big.safetensors";
  save_bytes(path, std::vector<std::byte>(1 << 20, std::byte{7}), "old");
  std::mt19937 random(3);
  for (int kill = 0; kill < 8; ++kill) {
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      const std::vector<std::byte> data(64 << 20, std::byte{9});
      for (;;) save_bytes(path, data, "new");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20 + random() % 300));
    ::kill(child, SIGKILL);
    int status = 0;
    ::waitpid(child, &status, 0);
    CHECK(WIFSIGNALED(status));
    // Whichever save last completed: a whole, valid file.
    const st::Header header = st::read_header(path);
    REQUIRE(header.tensors.size() == 1);
    const std::string name = header.tensors[0].name;
    CHECK((name == "old" || name == "new"));
    CHECK(header.tensors[0].byte_size() == (name == "old" ? 1u << 20 : 64u << 20));
    // The temporary was unnamed, or (killed between naming and renaming it)
    // is removed by the next save, since its writer is gone.
    const std::vector<std::string> left = names_in(dir.path());
    if (left.size() != 1) save_bytes(dir / "other.safetensors", {});
    std::vector<std::string> after = names_in(dir.path());
    std::erase(after, "other.safetensors");
    CHECK(after == std::vector<std::string>{"big.safetensors"});
  }
}

TEST_CASE("[safetensors] a save removes temporaries whose writer is gone, and no one else's") {
  TempDir dir;
  const std::string boot = boot_tag();
  REQUIRE(boot.size() == 8);
  // A pid that is gone: a child that has exited and been reaped.
  const pid_t gone = ::fork();
  if (gone == 0) ::_exit(0);
  ::waitpid(gone, nullptr, 0);
  const auto touch = [&](const std::string& name) { std::ofstream(dir / name) << "partial"; };
  const std::string dead = ".backplane-" + boot + "-" + std::to_string(gone) + "-0000abcd.tmp";
  const std::string live = ".backplane-" + boot + "-" + std::to_string(::getpid()) + "-0000abce.tmp";
  const std::string foreign_recent = ".backplane-ffffffff-123-0000abcf.tmp";
  const std::string foreign_old = ".backplane-ffffffff-124-0000abd0.tmp";
  const std::string unrelated = ".backplane-notes.tmp";
  for (const std::string& name : {dead, live, foreign_recent, foreign_old, unrelated}) touch(name);
  const auto two_days_ago = fs::file_time_type::clock::now() - std::chrono::hours(48);
  fs::last_write_time(dir / foreign_old, two_days_ago);

  save_bytes(dir / "model.safetensors", std::vector<std::byte>(8));
  std::vector<std::string> expected = {live, foreign_recent, unrelated, "model.safetensors"};
  std::sort(expected.begin(), expected.end());
  CHECK(names_in(dir.path()) == expected);
}

TEST_CASE("[safetensors] save refuses to replace a FIFO or another special file") {
  TempDir dir;
  const fs::path fifo = dir / "model.safetensors";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const Error error = error_from([&] { save_bytes(fifo, std::vector<std::byte>(8)); });
  CHECK(error.code() == ErrorCode::kInvalidArgument);
  CHECK(contains(error.what(), "cannot save to " + fifo.string() + ": it is a FIFO (named pipe), not a regular file"));
  CHECK(fs::is_fifo(fifo));
  CHECK(names_in(dir.path()) == std::vector<std::string>{"model.safetensors"});
}
