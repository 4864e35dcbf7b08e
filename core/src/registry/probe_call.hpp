// backend_create plus probe: the calls that decide a plugin's status, run
// with the probe deadline, and what their outcome means for the status.
// Shared by in-process discovery and the isolated probe helper.
#pragma once

#include "registry/backend.hpp"

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>

namespace backplane::detail {

// BACKPLANE_PROBE_TIMEOUT_MS as given (unset: 10000; 0 = no deadline). An
// invalid value is a warning and keeps the default.
std::uint32_t probe_timeout_ms(const std::optional<std::string>& text);

// What the calls gave: the backend once backend_create worked, the probe's
// answer once the probe did, and otherwise the error that stopped them. This
// is where a Backend's error becomes a value: a plugin that fails here has a
// status (failed, with the error as its reason), not an error for the caller.
struct ProbeOutcome {
  std::unique_ptr<Backend> backend;
  std::optional<Backend::ProbeAnswer> probed;
  std::optional<Error> failure;

  // The probe's answer; NULL when a call failed.
  const Backend::ProbeAnswer* answer() const { return probed ? &*probed : nullptr; }
  // The backend, which a failed backend_create leaves null.
  std::unique_ptr<Backend> take_backend() { return std::move(backend); }
};

// What to call and as whom: `name` is the backend's (an instance's,
// "pjrt_cpu"; empty: the table's); without `probe`, only backend_create (a
// probe-in-child plugin in the caller).
struct ProbeCalls {
  std::string name;
  bool probe = true;
};

// On the calling thread, without a deadline. `on_stage` is called with
// "backend_create" and then "probe" just before each call.
ProbeOutcome create_and_probe(const std::shared_ptr<PluginLibrary>& library, const PluginOptions& options,
                              const std::function<void(const char* stage)>& on_stage, const ProbeCalls& calls = {});

// On a helper thread, waiting at most `timeout_ms`. A call that does not
// return in time cannot be cancelled: its thread is detached and the plugin
// stays loaded until exit (unmapping code a thread is still running would
// crash). Returns nullopt plus the name of the call that hung when the
// deadline passed.
std::pair<std::optional<ProbeOutcome>, std::string> create_and_probe_within(
    const std::shared_ptr<PluginLibrary>& library, const PluginOptions& options, std::uint32_t timeout_ms,
    const ProbeCalls& calls = {});

// The status and reason an outcome gives the backend (one that probed).
struct ProbeVerdict {
  BackendStatus status = BackendStatus::kFailed;
  std::string reason;
};
ProbeVerdict verdict_of(const ProbeOutcome& outcome);

}  // namespace backplane::detail
