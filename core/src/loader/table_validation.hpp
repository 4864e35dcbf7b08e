// Checks a plugin's table before the core calls anything in it.
//
// Pure: reads only the table (within its declared struct_size) and calls no
// plugin function, so it is safe to run on any table and easy to fuzz.
#pragma once

#include <backplane/plugin.h>
#include <backplane/backplane.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace backplane::detail {

struct TableProblem {
  BackendStatus status;  // kIncompatible or kFailed
  std::string reason;
};

// `expected_name` is the <name> of backplane-<name>.so, or empty when the file
// was named directly and may be called anything.
std::optional<TableProblem> validate_table(const BP_PluginApi* table, std::string_view expected_name);

std::string abi_version_string(const BP_PluginApi& table);

// What is wrong with the capabilities and DLPack device type a probe stated
// (ABI 1.4), by the rules a table's keep: no negative type, kDLCPU only with
// BP_CAPABILITY_HOST_ADDRESSABLE, and each optional capability's call in
// `table`. The reason names the BP_ProbeArgs field. Pure, like validate_table.
std::optional<std::string> probe_statement_problem(const BP_PluginApi& table, BP_Capabilities capabilities,
                                                   std::int32_t dlpack_device_type);

}  // namespace backplane::detail
