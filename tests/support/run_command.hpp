// Runs a command line and captures what it printed and its exit status.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <stdexcept>
#include <string>

namespace backplane::testing {

struct CommandResult {
  int exit_status = -1;
  std::string output;  // stdout, plus stderr when the command line redirects it
};

inline CommandResult run_command(const std::string& command_line) {
  FILE* pipe = ::popen(command_line.c_str(), "r");
  if (pipe == nullptr) throw std::runtime_error("popen failed: " + command_line);
  CommandResult result;
  std::array<char, 4096> buffer{};
  std::size_t read = 0;
  while ((read = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0) result.output.append(buffer.data(), read);
  int status = ::pclose(pipe);
  result.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

}  // namespace backplane::testing
