#include "registry/discovery.hpp"

#include "loader/plugin_library.hpp"
#include "util/log.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <system_error>

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

// Opens, creates and probes one plugin; fills status and reason.
DiscoveredBackend load_and_probe(const Candidate& candidate, const DiscoveryPolicy& policy,
                                 const std::map<std::string, std::filesystem::path, std::less<>>& seen) {
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
  info.priority = library->api().priority;
  if (auto found = policy.priorities.find(info.name); found != policy.priorities.end()) {
    info.priority = found->second;
  }
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
  auto created = Backend::create(library, options == policy.options.end() ? kNoOptions : options->second);
  if (created.failure) {
    info.status = BackendStatus::kFailed;
    info.reason = fmt::format("backend_create failed: {}", created.failure->message);
    return result;
  }
  auto [answer, failure] = created.backend->probe();
  if (failure) {
    info.status = BackendStatus::kFailed;
    info.reason = fmt::format("probe failed ({}): {}", to_string(failure->code), failure->message);
  } else if (!answer->available) {
    info.status = BackendStatus::kUnavailable;
    info.reason = answer->reason.empty() ? "the plugin gave no reason" : answer->reason;
  } else {
    info.status = BackendStatus::kAvailable;
    info.reason = answer->reason;
    result.backend = std::move(created.backend);
  }
  return result;
}

}  // namespace

std::vector<DiscoveredBackend> discover(const std::vector<SearchPathEntry>& search_path,
                                        const DiscoveryPolicy& policy) {
  std::vector<DiscoveredBackend> found;
  std::map<std::string, std::filesystem::path, std::less<>> seen;  // name -> first file
  for (const auto& candidate : list_candidates(search_path)) {
    if (!candidate.name.empty()) {
      if (auto earlier = seen.find(candidate.name); earlier != seen.end()) {
        log(LogLevel::kDebug, "{}: skipped, shadowed by {}", candidate.file.string(), earlier->second.string());
        found.push_back({BackendInfo{candidate.name, BackendStatus::kShadowed,
                                     fmt::format("shadowed by {}, found earlier", earlier->second.string()),
                                     candidate.file, candidate.origin, "", "", 0, 0},
                         nullptr});
        continue;
      }
      seen.emplace(candidate.name, candidate.file);
      if (auto reason = disabled_reason(candidate.name, policy)) {
        log(LogLevel::kDebug, "{}: skipped, disabled ({})", candidate.file.string(), *reason);
        found.push_back({BackendInfo{candidate.name, BackendStatus::kDisabled,
                                     fmt::format("disabled: {}", *reason), candidate.file, candidate.origin,
                                     "", "", 0, 0},
                         nullptr});
        continue;
      }
    }
    DiscoveredBackend discovered = load_and_probe(candidate, policy, seen);
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
