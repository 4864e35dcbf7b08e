// One plugin file, several backends: the pjrt adapter (the first
// backplane-pjrt.so of the search path) becomes one backend pjrt_<name> per
// PJRT library, each created with options that name its library
// (loader/pjrt_sources.hpp).
#pragma once

#include "loader/pjrt_sources.hpp"
#include "registry/candidate.hpp"
#include "util/held_file.hpp"

#include <backplane/backplane.hpp>

#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace backplane::detail {

// Replaces the first candidate named pjrt with one candidate per source, in
// source order (a broken source listed failed with its problem). With no
// source, that candidate is listed unavailable with a reason saying where
// PJRT libraries were looked for (`searched`). With no adapter, each source
// is appended, failed, with a reason that says the adapter is not installed
// and where it was looked for (`search_path`).
void expand_pjrt_instances(std::vector<Candidate>& candidates, const std::vector<PjrtSource>& sources,
                           const std::string& searched, const std::vector<SearchPathEntry>& search_path);

// An instance whose user options (`options`, by backend name: a config's
// [backend.pjrt_NAME] table, Runtime::Options::backend_options) set
// `library` drives that library, not its source's: the candidate's library,
// which the trust rule checks and `info` lists, becomes that path (made
// absolute), and so does the `library` among its instance options. An empty
// value changes nothing (the adapter refuses it, loading nothing).
void adopt_library_options(std::vector<Candidate>& candidates,
                           const std::map<std::string, PluginOptions, std::less<>>& options);

// An instance's PJRT library, judged and held open (util/held_file.hpp):
// the adapter is given its /proc/self/fd/N as `library`, so that what it
// loads, at the first device use or in the probe helper, is the file judged
// here. Or why it must not be loaded, before anything loads it: a path that
// is missing, not a regular file or unreadable (naming the path and why), or
// one that fails the plugins' trust rule (util/trust.hpp).
std::variant<HeldFile, std::string> hold_pjrt_library(const std::filesystem::path& library);

}  // namespace backplane::detail
