// Two probes that can both succeed only when discovery runs them at once.
// Built twice, as rendezvous_a and rendezvous_b (BP_RENDEZVOUS_SELF and
// BP_RENDEZVOUS_PEER name this one and the other). Each probe marks its start
// with the file SELF.arrived in the directory given as option `dir`, waits at
// most 10 s for PEER.arrived, and says available only if it saw it: probed
// one after another, the first one waits in vain and is unavailable, with a
// reason saying so. With the option `leave_after_peer = "1"` the probe also
// waits for PEER.leaving (written just before a probe returns), so the two
// finish in a known order: the reverse of the search order, when it is a.
#include "fixture_backend.hpp"

#include <backplane/plugin_support.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#ifndef BP_RENDEZVOUS_SELF
#error "build with -DBP_RENDEZVOUS_SELF=\"name\" -DBP_RENDEZVOUS_PEER=\"name\""
#endif

namespace {

using backplane::plugin_sdk::Failure;
using backplane::plugin_sdk::guarded;
using backplane::plugin_sdk::require_args;

constexpr auto kWaitAtMost = std::chrono::seconds(10);

// Reasons are static strings: the ABI wants them valid until backend_destroy.
constexpr const char* kSawPeer = "saw " BP_RENDEZVOUS_PEER "'s probe start while probing";
constexpr const char* kNoPeer =
    "timed out after 10 s waiting for " BP_RENDEZVOUS_PEER "'s probe to start: the probes did not run at once";
constexpr const char* kPeerStayed =
    "saw " BP_RENDEZVOUS_PEER "'s probe start, but it did not finish within 10 s of that";
constexpr const char* kNoDirectory = "no rendezvous directory: give the option dir";
constexpr const char* kCannotMark = "cannot create its marker file in the rendezvous directory";

// Set by backend_create from the options, read by probe (of the same backend,
// called after it); the mutex is for a second runtime in the same process.
std::mutex g_mutex;
std::filesystem::path g_directory;
bool g_leave_after_peer = false;

BP_PluginApi g_fixture;  // the shared fixture's table: create is delegated to it

bool mark(const std::filesystem::path& file) {
  const int fd = ::open(file.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  ::close(fd);
  return true;
}

bool wait_for(const std::filesystem::path& file) {
  const auto deadline = std::chrono::steady_clock::now() + kWaitAtMost;
  struct stat status {};
  while (::stat(file.c_str(), &status) != 0) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

BP_Error* rendezvous_create(BP_BackendCreateArgs* args) noexcept {
  return guarded([&]() -> BP_Error* {
    require_args(args, "backend_create");
    std::filesystem::path directory;
    bool leave_after_peer = false;
    for (std::size_t i = 0; i < args->option_count; ++i) {
      const std::string_view key(args->options[i].key, args->options[i].key_size);
      const std::string_view value(args->options[i].value, args->options[i].value_size);
      if (key == "dir") {
        directory = std::string(value);
      } else if (key == "leave_after_peer") {
        leave_after_peer = value == "1";
      } else {
        throw Failure(BP_ERROR_INVALID_ARGUMENT, "unknown option '" + std::string(key) + "'");
      }
    }
    {
      std::lock_guard lock(g_mutex);
      g_directory = std::move(directory);
      g_leave_after_peer = leave_after_peer;
    }
    return g_fixture.backend_create(args);
  });
}

BP_Error* rendezvous_probe(BP_ProbeArgs* args) noexcept {
  return guarded([&]() -> BP_Error* {
    require_args(args, "probe");
    std::filesystem::path directory;
    bool leave_after_peer = false;
    {
      std::lock_guard lock(g_mutex);
      directory = g_directory;
      leave_after_peer = g_leave_after_peer;
    }
    const char* reason = kSawPeer;
    if (directory.empty()) {
      reason = kNoDirectory;
    } else if (!mark(directory / BP_RENDEZVOUS_SELF ".arrived")) {
      reason = kCannotMark;
    } else if (!wait_for(directory / BP_RENDEZVOUS_PEER ".arrived")) {
      reason = kNoPeer;
    } else if (leave_after_peer && !wait_for(directory / BP_RENDEZVOUS_PEER ".leaving")) {
      reason = kPeerStayed;
    } else if (!mark(directory / BP_RENDEZVOUS_SELF ".leaving")) {
      reason = kCannotMark;
    }
    args->available = reason == kSawPeer ? 1 : 0;
    args->reason = reason;
    args->reason_size = std::string_view(reason).size();
    return nullptr;
  });
}

BP_PluginApi make_rendezvous_table() noexcept {
  g_fixture = backplane::testing::make_table({.name = BP_RENDEZVOUS_SELF});
  BP_PluginApi table = g_fixture;
  table.backend_create = rendezvous_create;
  table.probe = rendezvous_probe;
  return table;
}

}  // namespace

extern "C" BP_PLUGIN_EXPORT const BP_PluginApi* backplane_plugin_entry(const BP_PluginEntryArgs* /*args*/) noexcept {
  static const BP_PluginApi table = make_rendezvous_table();
  return &table;
}
