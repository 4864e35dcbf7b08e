// Discovery's side of probe isolation: when a plugin is probed in the
// backplane-probe helper first (ProbeIsolation::kProcess), and how a plugin
// whose table declares BP_CAPABILITY_PROBE_IN_CHILD is always probed there.
// What the helper process is and says is isolation/'s.
#pragma once

#include "isolation/probe_process.hpp"
#include "registry/candidate.hpp"

#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>

namespace backplane::detail {

// The options backend_create gets for the backend named `name`.
using OptionsFor = std::function<PluginOptions(std::string_view name)>;

// With process isolation: loads, creates and probes the plugin in the probe
// helper first, unless it already passed there in this process. nullopt:
// load and probe it here. Otherwise the verdict it earned there: a status
// to list as it is, except for a probe-in-child plugin available there
// (verdict.in_child), whose verdict is the probe the caller keeps. Without a
// helper, or when none can be started, nullopt, with a warning.
std::optional<isolation::ChildVerdict> probe_isolated(const Candidate& candidate, const OptionsFor& options_for,
                                                      std::uint32_t timeout_ms);

// A probe-in-child plugin's probe, always in the helper, whatever the
// isolation setting and whether it passed there before. When no helper is
// installed, it may not be run (the trust rule) or it is broken, the
// verdict is `failed` with a reason that names the helper: such a plugin is
// never probed in the caller.
isolation::ChildVerdict probe_in_helper(const Candidate& candidate, const PluginOptions& options,
                                        std::uint32_t timeout_ms);

}  // namespace backplane::detail
