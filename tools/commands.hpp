// Subcommands of the `backplane` tool. Each returns the process exit status.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace backplane::tools {

using Arguments = std::vector<std::string_view>;

int run_info(const Arguments& args);
int run_conformance(const Arguments& args);  // conformance_command.cpp
int run_inspect(const Arguments& args);      // inspect_command.cpp
int run_load(const Arguments& args);         // load_command.cpp
int run_trace(const Arguments& args);        // trace_command.cpp

// `info` and `conformance` probe plugins in a separate process unless
// BACKPLANE_PROBE_ISOLATION says otherwise: the diagnostic tool must not die
// with the plugin it diagnoses (info_command.cpp).
bool isolation_by_default();

// "1.5 GiB", "512 B": binary units, one decimal.
std::string format_bytes(std::uint64_t bytes);

// A name from a file or a plugin as the terminal shows it (printable.cpp):
// as it is unless it holds control characters, which could rewrite the
// line, or is empty; then quoted, with escapes ("\x1b").
std::string printable(std::string_view text);

}  // namespace backplane::tools
