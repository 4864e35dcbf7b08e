#include "registry/discovery.hpp"

#include "loader/plugin_library.hpp"
#include "util/log.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>
#include <tuple>

namespace backplane {
namespace {

constexpr std::string_view kPrefix = "backplane-";
constexpr std::string_view kSuffix = ".so";

// "<name>" for a file called backplane-<name>.so, else empty.
std::string name_from_file(const std::filesystem::path& file) {
  std::string base = file.filename().string();
  if (base.size() <= kPrefix.size() + kSuffix.size() || !base.starts_with(kPrefix) ||
      !base.ends_with(kSuffix)) {
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
  if (policy.allowed &&
      std::find(policy.allowed->begin(), policy.allowed->end(), name) == policy.allowed->end()) {
    return fmt::format("not listed in {}", policy.allowed_source);
  }
  return std::nullopt;
}

// How long backend_create plus probe may take before the loader gives up on a
// plugin (BACKPLANE_PROBE_TIMEOUT_MS; 0 = wait forever, on the calling thread).
constexpr std::uint32_t kDefaultProbeTimeoutMs = 10000;
constexpr std::uint32_t kMaxProbeTimeoutMs = 3600 * 1000;

std::uint32_t probe_timeout_ms(const std::optional<std::string>& text) {
  if (!text || text->empty()) return kDefaultProbeTimeoutMs;
  std::uint32_t value = 0;
  auto [end, error] = std::from_chars(text->data(), text->data() + text->size(), value);
  if (error != std::errc() || end != text->data() + text->size() || value > kMaxProbeTimeoutMs) {
    log(LogLevel::kWarn, "BACKPLANE_PROBE_TIMEOUT_MS='{}' is not a number of milliseconds in 0..{}; using {}",
        *text, kMaxProbeTimeoutMs, kDefaultProbeTimeoutMs);
    return kDefaultProbeTimeoutMs;
  }
  return value;
}

struct ProbeOutcome {
  std::unique_ptr<Backend> backend;
  std::optional<PluginFailure> create_failure;
  std::optional<Backend::ProbeAnswer> answer;
  std::optional<PluginFailure> probe_failure;
};

// `on_created` runs between backend_create and probe (the deadline's report
// names the call that hung).
template <class OnCreated>
ProbeOutcome create_and_probe(const std::shared_ptr<PluginLibrary>& library, const PluginOptions& options,
                              OnCreated&& on_created) {
  ProbeOutcome outcome;
  auto created = Backend::create(library, options);
  if (created.failure) {
    outcome.create_failure = std::move(created.failure);
    return outcome;
  }
  outcome.backend = std::move(created.backend);
  on_created();
  std::tie(outcome.answer, outcome.probe_failure) = outcome.backend->probe();
  return outcome;
}

// State shared by the loader and the helper thread that calls the plugin. The
// helper may outlive the loader (a hung plugin), so it owns a reference too.
struct ProbeCall {
  std::mutex mutex;
  std::condition_variable finished;
  bool done = false;                      // guarded by mutex
  std::string stage = "backend_create";  // guarded by mutex
  ProbeOutcome outcome;                  // guarded by mutex, set with done
  std::exception_ptr error;              // guarded by mutex: what the helper threw
};

// Runs backend_create and probe on a helper thread and waits at most
// `timeout_ms`. A call that does not return in time cannot be cancelled: its
// thread is detached and the plugin stays loaded until exit (unmapping code a
// thread is still running would crash). Returns nullopt plus the name of the
// call that hung when the deadline passed.
std::pair<std::optional<ProbeOutcome>, std::string> create_and_probe_within(
    const std::shared_ptr<PluginLibrary>& library, const PluginOptions& options, std::uint32_t timeout_ms) {
  auto call = std::make_shared<ProbeCall>();
  std::thread helper;
  try {
    helper = std::thread([call, library, options] {
      ProbeOutcome outcome;
      std::exception_ptr error;
      try {
        outcome = create_and_probe(library, options, [&] {
          std::lock_guard lock(call->mutex);
          call->stage = "probe";
        });
      } catch (...) {  // bad_alloc: handed to the loader's thread
        error = std::current_exception();
      }
      std::lock_guard lock(call->mutex);
      call->outcome = std::move(outcome);
      call->error = error;
      call->done = true;
      call->finished.notify_all();
    });
  } catch (const std::system_error& exception) {
    // No thread to spare: call the plugin here, without a deadline.
    log(LogLevel::kWarn, "{}: cannot start the probe thread ({}); probing without a time limit",
        library->name(), exception.what());
    return {create_and_probe(library, options, [] {}), ""};
  }
  std::unique_lock lock(call->mutex);
  if (!call->finished.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return call->done; })) {
    // Set under the mutex the helper takes before it drops its references,
    // so the library's destructor (on whichever thread) sees it.
    library->keep_loaded();
    std::string stage = call->stage;
    lock.unlock();
    helper.detach();
    return {std::nullopt, stage};
  }
  if (call->error) {
    lock.unlock();
    helper.join();
    std::rethrow_exception(call->error);
  }
  ProbeOutcome outcome = std::move(call->outcome);
  lock.unlock();
  helper.join();
  return {std::move(outcome), ""};
}

// Opens, creates and probes one plugin; fills status and reason.
DiscoveredBackend load_and_probe(const Candidate& candidate, const DiscoveryPolicy& policy,
                                 const std::map<std::string, std::filesystem::path, std::less<>>& seen,
                                 std::uint32_t timeout_ms) {
  DiscoveredBackend result;
  BackendInfo& info = result.info;
  info.name = candidate.name;
  info.plugin_path = candidate.file;
  info.origin = candidate.origin;

  OpenedPlugin opened = open_plugin(candidate.file, candidate.name);
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

  static const PluginOptions kNoOptions;
  auto options = policy.options.find(info.name);
  const PluginOptions& plugin_options = options == policy.options.end() ? kNoOptions : options->second;
  std::optional<ProbeOutcome> outcome;
  if (timeout_ms == 0) {
    outcome = create_and_probe(library, plugin_options, [] {});
  } else {
    std::string hung_call;
    std::tie(outcome, hung_call) = create_and_probe_within(library, plugin_options, timeout_ms);
    if (!outcome) {
      info.status = BackendStatus::kFailed;
      info.reason = fmt::format(
          "{} did not answer within {} ms (BACKPLANE_PROBE_TIMEOUT_MS); the plugin stays loaded but unused",
          hung_call, timeout_ms);
      log(LogLevel::kWarn, "{}: {}", candidate.file.string(), info.reason);
      return result;
    }
  }
  if (outcome->create_failure) {
    info.status = BackendStatus::kFailed;
    info.reason = fmt::format("backend_create failed: {}", outcome->create_failure->message);
    return result;
  }
  auto& answer = outcome->answer;
  auto& failure = outcome->probe_failure;
  if (failure) {
    info.status = BackendStatus::kFailed;
    info.reason = fmt::format("probe failed ({}): {}", to_string(failure->code), failure->message);
    return result;
  }
  // The probe may rank the backend by what it found (ABI 1.2).
  if (configured_priority == policy.priorities.end()) info.priority = answer->priority;
  if (!answer->available) {
    info.status = BackendStatus::kUnavailable;
    info.reason = answer->reason.empty() ? "the plugin gave no reason" : answer->reason;
  } else {
    info.status = BackendStatus::kAvailable;
    info.reason = answer->reason;
    result.backend = std::move(outcome->backend);
  }
  return result;
}

}  // namespace

std::vector<DiscoveredBackend> discover(const std::vector<SearchPathEntry>& search_path,
                                        const DiscoveryPolicy& policy) {
  std::vector<DiscoveredBackend> found;
  std::map<std::string, std::filesystem::path, std::less<>> seen;  // name -> first file
  const std::uint32_t timeout_ms = probe_timeout_ms(policy.probe_timeout);
  for (const auto& candidate : list_candidates(search_path)) {
    if (!candidate.name.empty()) {
      if (auto earlier = seen.find(candidate.name); earlier != seen.end()) {
        log(LogLevel::kDebug, "{}: skipped, shadowed by {}", candidate.file.string(), earlier->second.string());
        found.push_back({BackendInfo{candidate.name, BackendStatus::kShadowed,
                                     fmt::format("shadowed by {}, found earlier", earlier->second.string()),
                                     candidate.file, candidate.origin, "", "", 0, 0, 0},
                         nullptr});
        continue;
      }
      seen.emplace(candidate.name, candidate.file);
      if (auto reason = disabled_reason(candidate.name, policy)) {
        log(LogLevel::kDebug, "{}: skipped, disabled ({})", candidate.file.string(), *reason);
        found.push_back({BackendInfo{candidate.name, BackendStatus::kDisabled,
                                     fmt::format("disabled: {}", *reason), candidate.file, candidate.origin,
                                     "", "", 0, 0, 0},
                         nullptr});
        continue;
      }
    }
    DiscoveredBackend discovered = load_and_probe(candidate, policy, seen, timeout_ms);
    if (candidate.name.empty() && discovered.info.status != BackendStatus::kShadowed) {
      seen.emplace(discovered.info.name, candidate.file);
    }
    log(LogLevel::kDebug, "{}: taken, backend '{}' is {}{}{}", candidate.file.string(), discovered.info.name,
        to_string(discovered.info.status), discovered.info.reason.empty() ? "" : ": ", discovered.info.reason);
    found.push_back(std::move(discovered));
  }
  return found;
}

}  // namespace backplane
