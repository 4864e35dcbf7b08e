// Whether the process of a /proc entry is still running: listed and not a
// zombie. A killed process stays listed until its parent (or init) reaps it,
// in state Z; the state is the field after the command name's closing
// parenthesis in /proc/PID/stat (the name itself may hold ") ").
#pragma once

#include <filesystem>
#include <fstream>
#include <string>

namespace backplane::testing {

inline bool is_running(const std::filesystem::path& proc_entry) {
  std::ifstream stat(proc_entry / "stat");
  std::string fields;
  std::getline(stat, fields);
  const auto state = fields.rfind(") ");
  return state != std::string::npos && state + 2 < fields.size() && fields[state + 2] != 'Z';
}

}  // namespace backplane::testing
