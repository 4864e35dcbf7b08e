// Where `backplane info` finds installed Python packages: the sys.path of an
// interpreter it asks (python3 on PATH; BACKPLANE_PYTHON names another, and
// an empty value asks none), so that it lists the PJRT and backplane plugin
// wheels that Python would see. Only the interpreter's own startup runs; the
// packages are then read from their files by the core.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace backplane::tools {

struct PythonPaths {
  std::string interpreter;                   // as named (BACKPLANE_PYTHON or "python3"); empty: none asked
  std::vector<std::filesystem::path> paths;  // its sys.path entries
  std::string note;                          // why none were taken, or how it went, in words
};

// Asks the interpreter, waiting at most kPythonTimeoutMs; never throws for
// what the interpreter does.
inline constexpr int kPythonTimeoutMs = 3000;
PythonPaths ask_python_for_paths();

}  // namespace backplane::tools
