#include "registry/isolated_probe.hpp"

#include "util/fork.hpp"
#include "util/log.hpp"
#include "util/trust.hpp"

#include <fmt/format.h>

#include <condition_variable>
#include <filesystem>
#include <map>
#include <string>

namespace backplane::detail {
namespace {

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

}  // namespace

std::optional<isolation::ChildVerdict> probe_isolated(const Candidate& candidate, const OptionsFor& options_for,
                                                      std::uint32_t timeout_ms) {
  // A directly named file reveals its name, and so its options, only once
  // read: the child then runs again if there are options to try.
  PluginOptions options = options_for(candidate.name);
  if (isolation::known_good(candidate.file, options)) return std::nullopt;
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
  auto verdict = isolation::probe_in_child(helper, candidate.file, candidate.table_name, candidate.name, options,
                                           timeout_ms, on_first_record);
  if (verdict.started && verdict.silent) {
    // Not the plugin's doing: the real helper speaks before it loads one.
    if (helper_states.mark_broken(helper)) {
      log(LogLevel::kWarn,
          "the probe helper is broken ({}); probing {} and every later plugin in this process, without isolation",
          verdict.reason, candidate.file.string());
    }
    return std::nullopt;
  }
  if (verdict.answered && candidate.name.empty() && !verdict.name.empty() && !options_for(verdict.name).empty()) {
    options = options_for(verdict.name);
    verdict =
        isolation::probe_in_child(helper, candidate.file, candidate.table_name, candidate.name, options, timeout_ms);
  }
  if (!verdict.started) {
    log(LogLevel::kWarn, "{}: {}; probing in this process", candidate.file.string(), verdict.reason);
    return std::nullopt;
  }
  if (verdict.answered &&
      (verdict.status == BackendStatus::kAvailable || verdict.status == BackendStatus::kUnavailable)) {
    // A probe-in-child plugin is never probed here: its child's verdict stands.
    if (verdict.in_child) return verdict;
    isolation::remember_good(candidate.file, options);
    return std::nullopt;
  }
  log(LogLevel::kDebug, "{}: {} in the probe process: {}", candidate.file.string(), to_string(verdict.status),
      verdict.reason);
  return verdict;
}

isolation::ChildVerdict probe_in_helper(const Candidate& candidate, const PluginOptions& options,
                                        std::uint32_t timeout_ms) {
  isolation::ChildVerdict verdict;
  const std::filesystem::path helper = isolation::helper_path();
  if (helper.empty()) {
    verdict.reason =
        "its table declares BP_CAPABILITY_PROBE_IN_CHILD (probing makes device state), and it is probed only in the "
        "probe helper backplane-probe, which is not installed next to the core library (backplane/backplane-probe) "
        "nor in the install's libdir";
    return verdict;
  }
  if (auto problem = untrusted_path(helper)) {
    verdict.reason = fmt::format(
        "its table declares BP_CAPABILITY_PROBE_IN_CHILD, and it is probed only in the probe helper {}, which is "
        "not run: {}",
        helper.string(), *problem);
    return verdict;
  }
  verdict =
      isolation::probe_in_child(helper, candidate.file, candidate.table_name, candidate.name, options, timeout_ms);
  if (!verdict.started || verdict.silent) {
    verdict.status = BackendStatus::kFailed;
    verdict.reason = fmt::format(
        "its table declares BP_CAPABILITY_PROBE_IN_CHILD, and it is probed only in the probe helper, which is "
        "broken: {}",
        verdict.reason);
    return verdict;
  }
  if (verdict.answered && !verdict.in_child && verdict.status == BackendStatus::kAvailable) {
    // The child read another table than the caller did (the file changed).
    verdict.status = BackendStatus::kFailed;
    verdict.reason = "the probe helper did not report what the probe found (the plugin file changed while it ran?)";
  }
  return verdict;
}

}  // namespace backplane::detail
