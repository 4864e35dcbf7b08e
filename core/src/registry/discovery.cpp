#include "registry/discovery.hpp"

#include "isolation/probe_process.hpp"

#include "loader/plugin_library.hpp"
#include "registry/candidate.hpp"
#include "registry/instances.hpp"
#include "registry/isolated_probe.hpp"
#include "registry/probe_call.hpp"
#include "trace/trace.hpp"
#include "util/concurrent_jobs.hpp"
#include "util/log.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <system_error>
#include <tuple>

namespace backplane::detail {
namespace {

constexpr std::string_view kPrefix = "backplane-";
constexpr std::string_view kSuffix = ".so";
// Plugins loaded and probed at once, at most. Probing mostly waits (on the
// disk, a driver's initialisation, a probe helper process), so this is not
// tied to the number of cores; it bounds a directory of many plugins.
constexpr std::size_t kMaxConcurrentProbes = 16;

// "<name>" for a file called backplane-<name>.so, else empty.
std::string name_from_file(const std::filesystem::path& file) {
  std::string base = file.filename().string();
  if (base.size() <= kPrefix.size() + kSuffix.size() || !base.starts_with(kPrefix) || !base.ends_with(kSuffix)) {
    return {};
  }
  return base.substr(kPrefix.size(), base.size() - kPrefix.size() - kSuffix.size());
}

std::vector<Candidate> list_candidates(const std::vector<SearchPathEntry>& search_path) {
  std::vector<Candidate> candidates;
  for (const auto& entry : search_path) {
    std::error_code error;
    auto status = std::filesystem::status(entry.path, error);
    if (std::filesystem::is_regular_file(status)) {
      Candidate candidate;
      candidate.file = entry.path;
      candidate.origin = entry.origin;
      candidate.origin_detail = entry.origin_detail;
      candidate.name = name_from_file(entry.path);
      candidate.table_name = candidate.name;
      candidates.push_back(std::move(candidate));
      log(LogLevel::kDebug, "{}: taken ({} names this file)", entry.path.string(), to_string(entry.origin));
      continue;
    }
    if (!std::filesystem::is_directory(status)) {
      bool user_given = entry.origin == SearchOrigin::kCode || entry.origin == SearchOrigin::kEnvironment ||
                        entry.origin == SearchOrigin::kConfig;
      log(user_given ? LogLevel::kWarn : LogLevel::kDebug, "plugin path {} ({}): {}", entry.path.string(),
          to_string(entry.origin), error ? error.message() : "not a file or directory");
      continue;
    }
    std::vector<Candidate> in_directory;
    for (const auto& item : std::filesystem::directory_iterator(entry.path, error)) {
      auto name = name_from_file(item.path());
      if (name.empty()) {
        log(LogLevel::kDebug, "{}: skipped (not named backplane-<name>.so)", item.path().string());
        continue;
      }
      Candidate candidate;
      candidate.file = item.path();
      candidate.origin = entry.origin;
      candidate.origin_detail = entry.origin_detail;
      candidate.name = std::move(name);
      candidate.table_name = candidate.name;
      in_directory.push_back(std::move(candidate));
    }
    if (error) log(LogLevel::kWarn, "cannot list plugin directory {}: {}", entry.path.string(), error.message());
    std::sort(in_directory.begin(), in_directory.end(),
              [](const Candidate& a, const Candidate& b) { return a.file < b.file; });
    std::move(in_directory.begin(), in_directory.end(), std::back_inserter(candidates));
  }
  return candidates;
}

std::optional<std::string> disabled_reason(std::string_view name, const DiscoveryPolicy& policy) {
  if (auto found = policy.disabled.find(name); found != policy.disabled.end()) return found->second;
  if (policy.allowed && std::find(policy.allowed->begin(), policy.allowed->end(), name) == policy.allowed->end()) {
    return fmt::format("not listed in {}", policy.allowed_source);
  }
  return std::nullopt;
}

// What backend_create gets for the backend `name` of `candidate`: an
// instance's own options first, then the user's for that name. An instance's
// own `library` already is the user's, checked (adopt_library_options), so
// the user's is not passed again.
PluginOptions options_for(const Candidate& candidate, const DiscoveryPolicy& policy, std::string_view name) {
  PluginOptions options = candidate.instance_options;
  if (auto found = policy.options.find(name); found != policy.options.end()) {
    for (const auto& option : found->second) {
      if (candidate.instance() && !candidate.instance_options.empty() && option.first == "library" &&
          !option.second.empty()) {
        continue;
      }
      options.push_back(option);
    }
  }
  return options;
}

// The names found so far, and what a later one of the same name is shadowed by.
using SeenNames = std::map<std::string, std::string, std::less<>>;

DiscoveredBackend listing(const Candidate& candidate, BackendStatus status, std::string reason) {
  DiscoveredBackend listed{candidate.info(), nullptr};
  listed.info.status = status;
  listed.info.reason = std::move(reason);
  return listed;
}

// A verdict of the probe helper listed as it is (nothing loaded here).
void take_verdict(BackendInfo& info, const Candidate& candidate, isolation::ChildVerdict& verdict) {
  if (info.name.empty()) info.name = verdict.name.empty() ? candidate.file.filename().string() : verdict.name;
  info.status = verdict.status;
  info.reason = std::move(verdict.reason);
  info.abi_version = std::move(verdict.abi_version);
  if (verdict.in_child) {
    info.capabilities = verdict.capabilities;
    info.dlpack_device_type = verdict.dlpack_device_type;
  }
}

// A probe-in-child plugin in the caller: its probe is the helper's, and here
// only backend_create runs; the backend answers from the helper's snapshot
// until a device is used.
void adopt_child_probe(DiscoveredBackend& result, const std::shared_ptr<PluginLibrary>& library,
                       const PluginOptions& options, isolation::ChildVerdict& verdict, bool priority_configured,
                       std::uint32_t timeout_ms) {
  BackendInfo& info = result.info;
  if (verdict.in_child && !priority_configured) info.priority = verdict.priority;
  if (!verdict.answered || verdict.status != BackendStatus::kAvailable) {
    info.status = verdict.answered ? verdict.status : BackendStatus::kFailed;
    info.reason = std::move(verdict.reason);
    return;
  }
  const ProbeCalls create_only{info.name, false};
  std::optional<ProbeOutcome> outcome;
  std::string hung_call;
  if (timeout_ms == 0) {
    outcome = create_and_probe(
        library, options, [](const char*) {}, create_only);
  } else {
    std::tie(outcome, hung_call) = create_and_probe_within(library, options, timeout_ms, create_only);
  }
  if (!outcome) {
    info.reason = fmt::format(
        "{} did not answer within {} ms (BACKPLANE_PROBE_TIMEOUT_MS); the plugin stays loaded "
        "but unused",
        hung_call, timeout_ms);
    return;
  }
  if (outcome->failure) {
    info.reason = outcome->failure->what();
    return;
  }
  std::unique_ptr<Backend> backend = outcome->take_backend();
  Backend::ProbeSnapshot snapshot;
  snapshot.answer = {true, verdict.reason, verdict.priority, verdict.capabilities, verdict.dlpack_device_type};
  snapshot.devices = std::move(verdict.devices);
  try {
    backend->adopt_snapshot(std::move(snapshot));
  } catch (const Error& error) {
    info.reason = error.what();
    return;
  }
  info.status = BackendStatus::kAvailable;
  info.reason = std::move(verdict.reason);
  info.capabilities = backend->capabilities();
  info.dlpack_device_type = backend->dlpack_device_type();
  result.live = std::move(backend);
}

// Opens, creates and probes one plugin; fills status and reason, and hands
// the library, when loaded (refused or not), to `loaded_library`. Runs on a
// discovery thread, while other plugins are probed: `seen` is only read here.
DiscoveredBackend load_and_probe(const Candidate& candidate, const DiscoveryPolicy& policy, const SeenNames& seen,
                                 std::uint32_t timeout_ms, std::shared_ptr<const void>& loaded_library) {
  DiscoveredBackend result{candidate.info(), nullptr};
  BackendInfo& info = result.info;
  // Nothing may load a PJRT library that others could swap, and the adapter
  // loads the file judged here, wherever and whenever it loads it.
  std::string held_library;
  if (candidate.instance()) {
    auto held = hold_pjrt_library(candidate.library);
    if (auto* problem = std::get_if<std::string>(&held)) {
      info.reason = std::move(*problem);
      return result;
    }
    held_library = std::get<HeldFile>(held).path;
  }
  const OptionsFor options_of = [&](std::string_view name) {
    PluginOptions options = options_for(candidate, policy, name);
    for (auto& [key, value] : options) {
      if (key == "library" && !held_library.empty()) value = held_library;
    }
    return options;
  };

  std::optional<isolation::ChildVerdict> child;
  if (policy.isolation == ProbeIsolation::kProcess) {
    child = probe_isolated(candidate, options_of, timeout_ms);
    if (child && !(child->in_child && child->status == BackendStatus::kAvailable)) {
      take_verdict(info, candidate, *child);
      return result;
    }
  }

  OpenedPlugin opened = open_plugin(candidate.file, candidate.table_name);
  if (opened.library) {
    loaded_library = opened.library;
  } else {
    loaded_library = opened.refused_library;
  }
  info.abi_version = opened.abi_version;
  if (opened.status != BackendStatus::kAvailable) {
    info.status = opened.status;
    info.reason = std::move(opened.reason);
    if (info.name.empty()) info.name = candidate.file.filename().string();
    return result;
  }
  auto library = opened.library;
  if (info.name.empty()) info.name = std::string(library->name());
  info.plugin_version = library->version();
  info.capabilities = library->api().capabilities;
  info.dlpack_device_type = library->dlpack_device_type();
  // The table's priority until the probe answers; the config's always wins.
  info.priority = library->api().priority;
  const auto configured_priority = policy.priorities.find(info.name);
  const bool priority_configured = configured_priority != policy.priorities.end();
  if (priority_configured) info.priority = configured_priority->second;
  // A directly named file only reveals its name once opened.
  if (candidate.name.empty()) {
    if (auto earlier = seen.find(info.name); earlier != seen.end()) {
      info.status = BackendStatus::kShadowed;
      info.reason = fmt::format("shadowed by {}, found earlier", earlier->second);
      return result;
    }
    if (auto reason = disabled_reason(info.name, policy)) {
      info.status = BackendStatus::kDisabled;
      info.reason = fmt::format("disabled: {}", *reason);
      return result;
    }
  }

  const PluginOptions options = options_of(info.name);
  if ((library->api().capabilities & BP_CAPABILITY_PROBE_IN_CHILD) != 0) {
    if (!child) child = probe_in_helper(candidate, options, timeout_ms);
    adopt_child_probe(result, library, options, *child, priority_configured, timeout_ms);
    return result;
  }
  const ProbeCalls calls{info.name, true};
  std::optional<ProbeOutcome> outcome;
  if (timeout_ms == 0) {
    outcome = create_and_probe(
        library, options, [](const char*) {}, calls);
  } else {
    std::string hung_call;
    std::tie(outcome, hung_call) = create_and_probe_within(library, options, timeout_ms, calls);
    if (!outcome) {
      info.status = BackendStatus::kFailed;
      info.reason =
          fmt::format("{} did not answer within {} ms (BACKPLANE_PROBE_TIMEOUT_MS); the plugin stays loaded but unused",
                      hung_call, timeout_ms);
      log(LogLevel::kWarn, "{}: {}", candidate.file.string(), info.reason);
      return result;
    }
  }
  ProbeVerdict verdict = verdict_of(*outcome);
  info.status = verdict.status;
  info.reason = std::move(verdict.reason);
  // The probe may rank the backend by what it found (ABI 1.2), and state what
  // it can do there (1.4).
  if (const Backend::ProbeAnswer* answer = outcome->answer()) {
    if (!priority_configured) info.priority = answer->priority;
    info.capabilities = answer->capabilities;
    info.dlpack_device_type = answer->dlpack_device_type;
  }
  if (info.status == BackendStatus::kAvailable) result.live = outcome->take_backend();
  return result;
}

}  // namespace

std::vector<DiscoveredBackend> discover(const DiscoveryInputs& inputs, const DiscoveryPolicy& policy) {
  std::vector<Candidate> candidates = list_candidates(inputs.search_path);
  expand_pjrt_instances(candidates, inputs.pjrt, inputs.pjrt_searched, inputs.search_path);
  adopt_library_options(candidates, policy.options);
  for (const BrokenPlugin& broken : inputs.broken_plugins) {
    Candidate listed;
    listed.file = broken.path;
    listed.origin = broken.origin;
    listed.origin_detail = broken.origin_detail;
    listed.name = broken.name.empty() ? broken.path.filename().string() : broken.name;
    listed.listed_status = BackendStatus::kFailed;
    listed.listed_reason = broken.reason;
    candidates.push_back(std::move(listed));
  }
  // In search order, whatever order the probes finish in.
  std::vector<DiscoveredBackend> found(candidates.size());
  SeenNames seen;
  const std::uint32_t timeout_ms = probe_timeout_ms(policy.probe_timeout);

  // The candidates to load and probe together. A file's name settles whether
  // it is shadowed or disabled before anything is opened, except after a
  // directly named file: its backend name, which may shadow the files after
  // it, is known only once it is opened, so it ends a wave.
  std::vector<std::size_t> wave;
  auto probe_wave = [&] {
    // The libraries of plugins left unused or refused are unloaded after the
    // wave, here: one unloaded while another thread loads the next may hand
    // it the same addresses, an order ThreadSanitizer cannot see (it would
    // report the plugins' statics as a race).
    std::vector<std::shared_ptr<const void>> opened(wave.size());
    // Children spawned by this wave's probes get the environment as it is
    // now, never environ while an in-process probe's setenv changes it.
    const isolation::SpawnEnvironmentScope spawn_environment;
    run_concurrently(wave.size(), kMaxConcurrentProbes, "bp-discovery", [&](std::size_t job) {
      const std::size_t index = wave[job];
      const Candidate& candidate = candidates[index];
      // The plugin's name is known only once probed: the range is named by
      // file, the event by backend.
      trace::Span probing;
      if (trace::enabled()) {
        probing = trace::Span(trace::category::kDiscovery,
                              fmt::format("{}{}", trace::event::kDiscoverPrefix, candidate.file.filename().string()));
      }
      found[index] = load_and_probe(candidate, policy, seen, timeout_ms, opened[job]);
      if (probing.active()) {
        const BackendInfo& info = found[index].info;
        probing.rename(fmt::format("{}{}", trace::event::kDiscoverPrefix, info.name));
        probing.end({}, {{"file", candidate.file.string()},
                         {"status", to_string(info.status)},
                         {"reason", info.reason},
                         {"isolation", to_string(policy.isolation)}});
      }
    });
    for (const std::size_t index : wave) {
      const Candidate& candidate = candidates[index];
      const BackendInfo& info = found[index].info;
      if (candidate.name.empty() && info.status != BackendStatus::kShadowed) {
        seen.emplace(info.name, candidate.shadow_name());
      }
      log(LogLevel::kDebug, "{}: taken, backend '{}' is {}{}{}", candidate.file.string(), info.name,
          to_string(info.status), info.reason.empty() ? "" : ": ", info.reason);
    }
    opened.clear();
    wave.clear();
  };

  for (std::size_t index = 0; index < candidates.size(); ++index) {
    const Candidate& candidate = candidates[index];
    if (!candidate.name.empty()) {
      if (auto earlier = seen.find(candidate.name); earlier != seen.end()) {
        log(LogLevel::kDebug, "{}: skipped, shadowed by {}", candidate.name, earlier->second);
        found[index] =
            listing(candidate, BackendStatus::kShadowed, fmt::format("shadowed by {}, found earlier", earlier->second));
        continue;
      }
      seen.emplace(candidate.name, candidate.shadow_name());
      if (auto reason = disabled_reason(candidate.name, policy)) {
        log(LogLevel::kDebug, "{}: skipped, disabled ({})", candidate.name, *reason);
        found[index] = listing(candidate, BackendStatus::kDisabled, fmt::format("disabled: {}", *reason));
        continue;
      }
    }
    if (candidate.listed_status) {
      found[index] = listing(candidate, *candidate.listed_status, candidate.listed_reason);
      continue;
    }
    wave.push_back(index);
    if (candidate.name.empty()) probe_wave();
  }
  probe_wave();
  return found;
}

}  // namespace backplane::detail
