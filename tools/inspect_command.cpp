// Placeholder until the 'inspect' command lands (see its issue); never shipped as done.
#include "commands.hpp"

#include <fmt/format.h>

#include <cstdio>

namespace backplane::tools {

int run_inspect(const Arguments&) {
  fmt::print(stderr, "backplane inspect: not built yet\n");
  return 1;
}

}  // namespace backplane::tools
