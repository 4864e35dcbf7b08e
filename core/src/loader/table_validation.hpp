// Checks a plugin's table before the core calls anything in it.
//
// Pure: reads only the table (within its declared struct_size) and calls no
// plugin function, so it is safe to run on any table and easy to fuzz.
#pragma once

#include <backplane/plugin.h>
#include <backplane/backplane.hpp>

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

}  // namespace backplane::detail
