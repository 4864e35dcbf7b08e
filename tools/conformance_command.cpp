// Placeholder until the 'conformance' command lands (see its issue); never shipped as done.
#include "commands.hpp"

#include <fmt/format.h>

#include <cstdio>

namespace backplane::tools {

int run_conformance(const Arguments&) {
  fmt::print(stderr, "backplane conformance: not built yet\n");
  return 1;
}

}  // namespace backplane::tools
