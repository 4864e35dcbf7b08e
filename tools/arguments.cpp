#include "arguments.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace backplane::tools {

ParsedArguments parse_arguments(const Arguments& args, std::initializer_list<OptionSpec> known) {
  ParsedArguments parsed;
  bool options_done = false;
  for (std::size_t index = 0; index < args.size(); ++index) {
    const std::string_view arg = args[index];
    if (options_done || arg.size() < 2 || arg.front() != '-') {
      parsed.positional.push_back(arg);
      continue;
    }
    if (arg == "--") {
      options_done = true;
      continue;
    }
    if (arg == "--help" || arg == "-h") {
      parsed.help = true;
      return parsed;
    }
    const std::size_t equals = arg.find('=');
    const std::string_view name = arg.substr(0, equals);
    const auto spec = std::find_if(known.begin(), known.end(), [&](const OptionSpec& option) {
      return option.name == name && (option.takes_value || equals == std::string_view::npos);
    });
    if (spec == known.end()) {
      parsed.error = fmt::format("unknown option '{}'", arg);
      return parsed;
    }
    if (!spec->takes_value) {
      parsed.options.emplace_back(name, std::string_view());
    } else if (equals != std::string_view::npos) {
      parsed.options.emplace_back(name, arg.substr(equals + 1));
    } else if (index + 1 < args.size()) {
      parsed.options.emplace_back(name, args[++index]);
    } else {
      parsed.error = fmt::format("{} needs a value", arg);
      return parsed;
    }
  }
  return parsed;
}

}  // namespace backplane::tools
