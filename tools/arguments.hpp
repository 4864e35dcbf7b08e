// The one argument loop of the subcommands that take options and files:
// `--help`/`-h`, options with a value (`--name VALUE` or `--name=VALUE`),
// flags, and positional arguments (everything after `--`, and a lone `-`).
#pragma once

#include "commands.hpp"

#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace backplane::tools {

struct OptionSpec {
  std::string_view name;  // with its dashes: "--device"
  bool takes_value;
};

// Parsing stops at `--help` or at the first problem.
struct ParsedArguments {
  bool help = false;
  std::string error;  // "unknown option '--x'", "--device needs a value"; empty when none
  std::vector<std::pair<std::string_view, std::string_view>> options;  // in order; a flag's value is ""
  std::vector<std::string_view> positional;
};

ParsedArguments parse_arguments(const Arguments& args, std::initializer_list<OptionSpec> known);

}  // namespace backplane::tools
