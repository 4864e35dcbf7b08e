// Turns the search path into backends, each with exactly one status.
#pragma once

#include "loader/pjrt_sources.hpp"
#include "loader/search_path.hpp"
#include "registry/backend.hpp"

#include <backplane/backplane.hpp>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace backplane::detail {

struct DiscoveryPolicy {
  // When set, only these backends are opened; the rest are `disabled` with
  // `allowed_source` (e.g. "BACKPLANE_BACKENDS=cuda,cpu") as the reason.
  std::optional<std::vector<std::string>> allowed;
  std::string allowed_source;
  // Backends switched off by name, with the reason to report.
  std::map<std::string, std::string, std::less<>> disabled;
  std::map<std::string, PluginOptions, std::less<>> options;
  std::map<std::string, int, std::less<>> priorities;
  // BACKPLANE_PROBE_TIMEOUT_MS as the runtime reads it (unset: the default).
  std::optional<std::string> probe_timeout;
  // kProcess: each plugin not yet known to be good is first loaded, created
  // and probed in a child process (isolation/probe_process.hpp).
  ProbeIsolation isolation = ProbeIsolation::kNone;
};

struct DiscoveredBackend {
  BackendInfo info;
  // Set only when info.status is kAvailable. Shared: arrays and buffers keep
  // their backend alive.
  std::shared_ptr<Backend> live;
};

// What discovery lists.
struct DiscoveryInputs {
  std::vector<SearchPathEntry> search_path;
  // Plugin sources that cannot be searched, listed failed after the search
  // path's plugins.
  std::vector<BrokenPlugin> broken_plugins;
  // Every PJRT library, in source order: the backends of the pjrt adapter.
  std::vector<PjrtSource> pjrt;
  std::string pjrt_searched;  // where they were looked for
};

// One entry per plugin file (a plugin serving several backends: one per
// instance), in search order, then the broken sources. The plugins are
// loaded and probed concurrently (each under the probe deadline, or in its
// own probe helper with kProcess), so this takes about as long as the
// slowest one.
std::vector<DiscoveredBackend> discover(const DiscoveryInputs& inputs, const DiscoveryPolicy& policy);

}  // namespace backplane::detail
