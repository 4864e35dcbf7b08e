#include "registry/discovery.hpp"

#include "isolation/probe_process.hpp"
#include "loader/plugin_library.hpp"
#include "registry/probe_call.hpp"
#include "trace/trace.hpp"
#include "util/concurrent_jobs.hpp"
#include "util/fork.hpp"
#include "util/log.hpp"
#include "util/trust.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <condition_variable>
#include <functional>
#include <mutex>
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

struct Candidate {
  std::filesystem::path file;
  SearchOrigin origin;
  std::string name;  // from the file name; empty for a directly named file
};

std::vector<Candidate> list_candidates(const std::vector<SearchPathEntry>& search_path) {
  std::vector<Candidate> candidates;
  for (const auto& entry : search_path) {
    std::error_code error;
    auto status = std::filesystem::status(entry.path, error);
    if (std::filesystem::is_regular_file(status)) {
      candidates.push_back({entry.path, entry.origin, name_from_file(entry.path)});
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
      in_directory.push_back({item.path(), entry.origin, std::move(name)});
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

const PluginOptions& options_for(const DiscoveryPolicy& policy, std::string_view name) {
  static const PluginOptions kNoOptions;
  auto found = policy.options.find(name);
  return found == policy.options.end() ? kNoOptions : found->second;
}

// What this process knows of each probe helper. One that says nothing at all
// is a broken installation, reported once, after which plugins are probed
// here. Plugins are probed concurrently, but an untried helper runs one child
// first: the others start once it has written anything (the real helper does
// before it touches a plugin, within milliseconds), so a broken helper still
// runs once, not once per plugin.
class HelperStates {
 public:
  enum class State { kUntried, kTrying, kSpoke, kBroken };

  // kSpoke or kBroken, waiting while another thread tries the helper; or
  // kTrying: the caller tries it, and reports with spoke() or mark_broken(),
  // then tried().
  State claim(const std::filesystem::path& helper) {
    std::unique_lock lock(mutex_);
    for (;;) {
      Entry& entry = states_[helper];
      // A try of the parent's, forked into this process, never ends here.
      if (entry.state == State::kTrying && entry.generation != fork_generation()) entry.state = State::kUntried;
      if (entry.state == State::kUntried) {
        entry = {State::kTrying, fork_generation()};
        return State::kTrying;
      }
      if (entry.state != State::kTrying) return entry.state;
      changed_.wait(lock);
    }
  }
  void spoke(const std::filesystem::path& helper) { settle(helper, State::kSpoke); }
  // The trying child is over: if it neither spoke nor was found broken (it
  // did not start), the next plugin tries the helper.
  void tried(const std::filesystem::path& helper) { settle(helper, State::kUntried); }
  // True when `helper` was not known broken yet.
  bool mark_broken(const std::filesystem::path& helper) {
    std::lock_guard lock(mutex_);
    State& state = states_[helper].state;
    const bool news = state != State::kBroken;
    state = State::kBroken;
    changed_.notify_all();
    return news;
  }

 private:
  // Leaves kTrying for `to`; a state already settled stays.
  void settle(const std::filesystem::path& helper, State to) {
    std::lock_guard lock(mutex_);
    State& state = states_[helper].state;
    if (state != State::kTrying) return;
    state = to;
    changed_.notify_all();
  }

  struct Entry {
    State state = State::kUntried;
    std::uint64_t generation = 0;  // fork_generation() of the process trying it
  };
  // Fork-safe: a discovery thread holding it at fork() must not leave it
  // locked in the child.
  ForkSafeMutex mutex_;
  std::condition_variable_any changed_;
  std::map<std::filesystem::path, Entry> states_;  // guarded by mutex_
};
HelperStates& helper_states = *new HelperStates;  // never destroyed: used until exit

// With process isolation: loads, creates and probes the plugin in the probe
// helper first, unless it already passed there in this process. nullopt:
// load it here. Otherwise the status it earned there, and it is never loaded
// here. Without a helper, or when none can be started, the plugin is probed
// here, with a warning.
std::optional<isolation::ChildVerdict> probe_isolated(const Candidate& candidate, const DiscoveryPolicy& policy,
                                                      std::uint32_t timeout_ms) {
  // A directly named file reveals its name, and so its options, only once
  // read: the child then runs again if there are options to try.
  const PluginOptions* options = &options_for(policy, candidate.name);
  if (isolation::known_good(candidate.file, *options)) return std::nullopt;
  const std::filesystem::path helper = isolation::helper_path();
  if (helper.empty()) {
    log(LogLevel::kWarn,
        "{}: probe isolation asked for, but no backplane-probe helper is installed next to the "
        "core library; probing in this process",
        candidate.file.string());
    return std::nullopt;
  }
  // The helper runs plugins' code as we do: the plugins' trust rule applies.
  if (auto problem = untrusted_path(helper)) {
    log(LogLevel::kWarn, "{}: probe isolation asked for, but the probe helper is not run: {}; probing in this process",
        candidate.file.string(), *problem);
    return std::nullopt;
  }
  const HelperStates::State known = helper_states.claim(helper);
  if (known == HelperStates::State::kBroken) return std::nullopt;
  std::function<void()> on_first_record;
  if (known == HelperStates::State::kTrying) on_first_record = [&helper] { helper_states.spoke(helper); };
  // Whatever happens below, the plugins waiting for this try go on.
  struct EndTry {
    const std::filesystem::path& helper;
    bool trying;
    ~EndTry() {
      if (trying) helper_states.tried(helper);
    }
  } end_try{helper, known == HelperStates::State::kTrying};
  auto verdict =
      isolation::probe_in_child(helper, candidate.file, candidate.name, *options, timeout_ms, on_first_record);
  if (verdict.started && verdict.silent) {
    // Not the plugin's doing: the real helper speaks before it loads one.
    if (helper_states.mark_broken(helper)) {
      log(LogLevel::kWarn,
          "the probe helper is broken ({}); probing {} and every later plugin in this process, without isolation",
          verdict.reason, candidate.file.string());
    }
    return std::nullopt;
  }
  if (verdict.answered && candidate.name.empty() && !verdict.name.empty() &&
      !options_for(policy, verdict.name).empty()) {
    options = &options_for(policy, verdict.name);
    verdict = isolation::probe_in_child(helper, candidate.file, candidate.name, *options, timeout_ms);
  }
  if (!verdict.started) {
    log(LogLevel::kWarn, "{}: {}; probing in this process", candidate.file.string(), verdict.reason);
    return std::nullopt;
  }
  if (verdict.answered &&
      (verdict.status == BackendStatus::kAvailable || verdict.status == BackendStatus::kUnavailable)) {
    isolation::remember_good(candidate.file, *options);
    return std::nullopt;
  }
  log(LogLevel::kDebug, "{}: {} in the probe process: {}", candidate.file.string(), to_string(verdict.status),
      verdict.reason);
  return verdict;
}

// Opens, creates and probes one plugin; fills status and reason, and hands
// the library, when opened, to `opened_library`. Runs on a discovery thread,
// while other plugins are probed: `seen` is only read here.
DiscoveredBackend load_and_probe(const Candidate& candidate, const DiscoveryPolicy& policy,
                                 const std::map<std::string, std::filesystem::path, std::less<>>& seen,
                                 std::uint32_t timeout_ms, std::shared_ptr<PluginLibrary>& opened_library) {
  DiscoveredBackend result;
  BackendInfo& info = result.info;
  info.name = candidate.name;
  info.plugin_path = candidate.file;
  info.origin = candidate.origin;

  if (policy.isolation == ProbeIsolation::kProcess) {
    if (auto verdict = probe_isolated(candidate, policy, timeout_ms)) {
      if (info.name.empty()) info.name = verdict->name.empty() ? candidate.file.filename().string() : verdict->name;
      info.status = verdict->status;
      info.reason = std::move(verdict->reason);
      info.abi_version = std::move(verdict->abi_version);
      return result;
    }
  }

  OpenedPlugin opened = open_plugin(candidate.file, candidate.name);
  opened_library = opened.library;
  info.abi_version = opened.abi_version;
  if (opened.status != BackendStatus::kAvailable) {
    info.status = opened.status;
    info.reason = std::move(opened.reason);
    if (info.name.empty()) info.name = candidate.file.filename().string();
    return result;
  }
  auto library = opened.library;
  info.name = std::string(library->name());
  info.plugin_version = library->version();
  info.capabilities = library->api().capabilities;
  info.dlpack_device_type = library->dlpack_device_type();
  // The table's priority until the probe answers; the config's always wins.
  info.priority = library->api().priority;
  const auto configured_priority = policy.priorities.find(info.name);
  if (configured_priority != policy.priorities.end()) info.priority = configured_priority->second;
  // A directly named file only reveals its name once opened.
  if (candidate.name.empty()) {
    if (auto earlier = seen.find(info.name); earlier != seen.end()) {
      info.status = BackendStatus::kShadowed;
      info.reason = fmt::format("shadowed by {}, found earlier", earlier->second.string());
      return result;
    }
    if (auto reason = disabled_reason(info.name, policy)) {
      info.status = BackendStatus::kDisabled;
      info.reason = fmt::format("disabled: {}", *reason);
      return result;
    }
  }

  const PluginOptions& options = options_for(policy, info.name);
  std::optional<ProbeOutcome> outcome;
  if (timeout_ms == 0) {
    outcome = create_and_probe(library, options, [](const char*) {});
  } else {
    std::string hung_call;
    std::tie(outcome, hung_call) = create_and_probe_within(library, options, timeout_ms);
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
  // The probe may rank the backend by what it found (ABI 1.2).
  const Backend::ProbeAnswer* answer = outcome->answer();
  if (answer != nullptr && configured_priority == policy.priorities.end()) info.priority = answer->priority;
  if (info.status == BackendStatus::kAvailable) result.live = outcome->take_backend();
  return result;
}

}  // namespace

std::vector<DiscoveredBackend> discover(const std::vector<SearchPathEntry>& search_path,
                                        const DiscoveryPolicy& policy) {
  const std::vector<Candidate> candidates = list_candidates(search_path);
  // In search order, whatever order the probes finish in.
  std::vector<DiscoveredBackend> found(candidates.size());
  std::map<std::string, std::filesystem::path, std::less<>> seen;  // name -> first file
  const std::uint32_t timeout_ms = probe_timeout_ms(policy.probe_timeout);

  // The candidates to load and probe together. A file's name settles whether
  // it is shadowed or disabled before anything is opened, except after a
  // directly named file: its backend name, which may shadow the files after
  // it, is known only once it is opened, so it ends a wave.
  std::vector<std::size_t> wave;
  auto probe_wave = [&] {
    // The libraries of plugins left unused are unloaded after the wave, here:
    // one unloaded while another thread loads the next may hand it the same
    // addresses, an order ThreadSanitizer cannot see (it would report the
    // plugins' statics as a race).
    std::vector<std::shared_ptr<PluginLibrary>> opened(wave.size());
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
      if (candidate.name.empty() && info.status != BackendStatus::kShadowed) seen.emplace(info.name, candidate.file);
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
        log(LogLevel::kDebug, "{}: skipped, shadowed by {}", candidate.file.string(), earlier->second.string());
        found[index] = {BackendInfo{candidate.name, BackendStatus::kShadowed,
                                    fmt::format("shadowed by {}, found earlier", earlier->second.string()),
                                    candidate.file, candidate.origin, "", "", 0, 0, 0},
                        nullptr};
        continue;
      }
      seen.emplace(candidate.name, candidate.file);
      if (auto reason = disabled_reason(candidate.name, policy)) {
        log(LogLevel::kDebug, "{}: skipped, disabled ({})", candidate.file.string(), *reason);
        found[index] = {BackendInfo{candidate.name, BackendStatus::kDisabled, fmt::format("disabled: {}", *reason),
                                    candidate.file, candidate.origin, "", "", 0, 0, 0},
                        nullptr};
        continue;
      }
    }
    wave.push_back(index);
    if (candidate.name.empty()) probe_wave();
  }
  probe_wave();
  return found;
}

}  // namespace backplane::detail
