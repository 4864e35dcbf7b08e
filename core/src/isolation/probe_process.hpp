// Discovery that survives a crashing plugin: each plugin not yet known to be
// good is first loaded, created and probed in a short-lived child process
// (the `backplane-probe` helper). A crash, an exit or a hang there costs only
// that plugin's status; the caller's process never ran its code.
#pragma once

#include "loader/plugin_library.hpp"

#include <backplane/backplane.hpp>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace backplane::detail::isolation {

// `<dir of the core library>/backplane/backplane-probe`, else the install's
// `<libdir>/backplane/backplane-probe`; empty when neither is an executable.
std::filesystem::path helper_path();
// For tests: helper_path() returns `helper`, an empty path meaning none is
// installed (nullopt: the real one again).
void override_helper_for_testing(std::optional<std::filesystem::path> helper);

struct ChildVerdict {
  bool started = false;   // the helper process was started
  bool answered = false;  // it loaded, created and probed the plugin and said what it found
  // It said nothing at all, not even the stage it began: the real helper
  // always does before it touches the plugin, so this is a broken helper.
  bool silent = false;
  BackendStatus status = BackendStatus::kFailed;
  std::string reason;       // the plugin's reason, or how the child ended (signal, exit, hang)
  std::string abi_version;  // as the table declared it, when the child read one
  std::string name;         // the table's backend name, when the child read one
  // The table declares BP_CAPABILITY_PROBE_IN_CHILD: the child's probe is the
  // one the caller keeps, with what it found (devices only when available).
  bool in_child = false;
  std::int32_t priority = 0;
  std::uint64_t capabilities = 0;
  std::int32_t dlpack_device_type = 0;
  std::vector<DeviceInfo> devices;  // backend and ordinal left unset
};

// Runs the helper on `file` with the deadline `timeout_ms` (0: none) for the
// whole child: loading (static constructors, entry point), backend_create and
// probe. `on_first_record`, when given, is called as soon as the child first
// writes to its result pipe (the real helper does before it touches the
// plugin), on the calling thread.
// Never throws for anything the plugin does.
// The environment the probe children get while a discovery runs: the
// process's, copied by the thread that starts a wave of probes before they
// run on other threads. An in-process probe may call setenv (PoCL does)
// while another thread starts a child, and posix_spawn reads `environ`
// without the lock setenv takes. Outside every scope a child gets `environ`
// as it is then.
struct EnvironmentCopy;
class SpawnEnvironmentScope {
 public:
  SpawnEnvironmentScope();
  ~SpawnEnvironmentScope();
  SpawnEnvironmentScope(const SpawnEnvironmentScope&) = delete;
  SpawnEnvironmentScope& operator=(const SpawnEnvironmentScope&) = delete;

 private:
  std::shared_ptr<const EnvironmentCopy> previous_;
};

// `backend_name`: the backend the plugin serves as, which messages about its
// answers name (an instance's, "pjrt_cpu"; empty: the table's name). An
// option whose value is the /proc/self/fd/N of a held file
// (util/held_file.hpp) reaches the child's same descriptor.
ChildVerdict probe_in_child(const std::filesystem::path& helper, const std::filesystem::path& file,
                            std::string_view expected_name, std::string_view backend_name, const PluginOptions& options,
                            std::uint32_t timeout_ms, const std::function<void()>& on_first_record = {});

// Whether this file, unchanged since (same device, inode, size and mtime), and
// these options already answered in a child in this process.
bool known_good(const std::filesystem::path& file, const PluginOptions& options);
void remember_good(const std::filesystem::path& file, const PluginOptions& options);

}  // namespace backplane::detail::isolation
