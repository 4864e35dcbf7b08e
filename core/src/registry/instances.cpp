#include "registry/instances.hpp"

#include "util/file_type.hpp"

#include <fmt/format.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace backplane::detail {
namespace {

Candidate instance_of(const Candidate& adapter, const PjrtSource& source) {
  Candidate instance;
  instance.file = adapter.file;
  instance.origin = source.origin;
  instance.origin_detail = source.origin_detail;
  instance.name = source.backend;
  instance.table_name = adapter.table_name;
  instance.library = source.library.empty() ? std::filesystem::path(source.name) : source.library;
  if (source.problem.empty()) {
    instance.instance_options = adapter_options(source);
  } else {
    instance.listed_status = BackendStatus::kFailed;
    instance.listed_reason = source.problem;
  }
  return instance;
}

}  // namespace

void expand_pjrt_instances(std::vector<Candidate>& candidates, const std::vector<PjrtSource>& sources,
                           const std::string& searched, const std::vector<SearchPathEntry>& search_path) {
  const auto adapter = std::find_if(candidates.begin(), candidates.end(),
                                    [](const Candidate& candidate) { return candidate.name == kPjrtAdapterName; });
  if (adapter == candidates.end()) {
    std::vector<std::string> places;
    for (const auto& entry : search_path) places.push_back(entry.path.string());
    const std::string reason = fmt::format(
        "the pjrt adapter plugin (backplane-{}.so), which drives PJRT plugins, is not installed: looked in {} "
        "(every build has it unless configured with -Dpjrt=disabled: rebuild without that option, "
        "see docs/pjrt.md, Building)",
        kPjrtAdapterName,
        places.empty() ? std::string("nothing (the plugin search path is empty)")
                       : fmt::format("{}", fmt::join(places, ", ")));
    for (const PjrtSource& source : sources) {
      Candidate listed;
      listed.origin = source.origin;
      listed.origin_detail = source.origin_detail;
      listed.name = source.backend;
      listed.library = source.library;
      listed.listed_status = BackendStatus::kFailed;
      listed.listed_reason = source.problem.empty() ? reason : source.problem;
      candidates.push_back(std::move(listed));
    }
    return;
  }
  // Later adapters are shadowed by this one, whatever becomes of it.
  for (auto later = adapter + 1; later != candidates.end(); ++later) {
    if (later->name != kPjrtAdapterName) continue;
    later->listed_status = BackendStatus::kShadowed;
    later->listed_reason = fmt::format("shadowed by {}, found earlier", adapter->file.string());
  }
  if (sources.empty()) {
    adapter->listed_status = BackendStatus::kUnavailable;
    adapter->listed_reason = fmt::format("no PJRT plugin found: looked in {}", searched);
    return;
  }
  std::vector<Candidate> instances;
  for (const PjrtSource& source : sources) instances.push_back(instance_of(*adapter, source));
  const auto at = candidates.erase(adapter);
  candidates.insert(at, std::make_move_iterator(instances.begin()), std::make_move_iterator(instances.end()));
}

void adopt_library_options(std::vector<Candidate>& candidates,
                           const std::map<std::string, PluginOptions, std::less<>>& options) {
  for (Candidate& candidate : candidates) {
    if (!candidate.instance() || candidate.instance_options.empty()) continue;
    const auto found = options.find(candidate.name);
    if (found == options.end()) continue;
    const std::string* chosen = nullptr;  // the adapter reads the last one given
    for (const auto& [key, value] : found->second) {
      if (key == "library") chosen = &value;
    }
    if (chosen == nullptr || chosen->empty()) continue;
    std::error_code error;
    const std::filesystem::path library = std::filesystem::absolute(*chosen, error);
    candidate.library = (error ? std::filesystem::path(*chosen) : library).lexically_normal();
    for (auto& [key, value] : candidate.instance_options) {
      if (key == "library") value = candidate.library.string();
    }
  }
}

std::variant<HeldFile, std::string> hold_pjrt_library(const std::filesystem::path& library) {
  struct stat status {};
  if (::stat(library.c_str(), &status) != 0) {
    return fmt::format("cannot use the PJRT library {}: {}", library.string(), std::strerror(errno));
  }
  if (!S_ISREG(status.st_mode)) {
    return fmt::format(
        "cannot use the PJRT library {}: it is {}, not a regular file (a PJRT plugin is a shared "
        "library)",
        library.string(), file_type_name(status.st_mode));
  }
  if (::access(library.c_str(), R_OK) != 0) {
    return fmt::format("cannot use the PJRT library {}: {}", library.string(), std::strerror(errno));
  }
  // The library's code runs in this process, as a plugin's does.
  auto held = hold_trusted_file(library);
  if (auto* problem = std::get_if<std::string>(&held); problem != nullptr && !problem->starts_with("refused: ")) {
    return fmt::format("cannot use the PJRT library: {}", *problem);
  }
  return held;
}

}  // namespace backplane::detail
