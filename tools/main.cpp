// `backplane`: the command-line front end. Each subcommand lives in its own file.
#include "commands.hpp"

#include <backplane/backplane.hpp>

#include <fmt/format.h>

#include <cstdio>
#include <exception>
#include <string_view>
#include <vector>

namespace {

constexpr std::string_view kUsage =
    "usage: backplane <command> [options]\n"
    "\n"
    "commands:\n"
    "  info [--json]                 plugin search path, backends with status and reason,\n"
    "                                devices, config file, default device and its source\n"
    "  inspect FILE [--json]         tensors, dtypes, shapes, offsets, metadata, verdict\n"
    "  load FILE --device SEL        load a safetensors file onto a device, report GB/s\n"
    "  conformance PLUGIN.so [--option k=v ...]\n"
    "                                run the backend conformance suite against a plugin\n"
    "  trace summary FILE [--json]   time, bytes and GB/s per device and category in a trace\n"
    "  help                          this text\n";

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string_view> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "help" || args[0] == "--help" || args[0] == "-h") {
    fmt::print(args.empty() ? stderr : stdout, "{}", kUsage);
    return args.empty() ? 2 : 0;
  }
  if (args[0] == "--version") {
    fmt::print("backplane {}\n", backplane::version());
    return 0;
  }
  std::string_view command = args[0];
  args.erase(args.begin());
  try {
    if (command == "info") return backplane::tools::run_info(args);
    if (command == "conformance") return backplane::tools::run_conformance(args);
    if (command == "inspect") return backplane::tools::run_inspect(args);
    if (command == "load") return backplane::tools::run_load(args);
    if (command == "trace") return backplane::tools::run_trace(args);
  } catch (const backplane::Error& error) {
    fmt::print(stderr, "backplane {}: error: {}\n", command, error.what());
    return 1;
  } catch (const std::exception& error) {
    fmt::print(stderr, "backplane {}: internal error: {}\n", command, error.what());
    return 1;
  }
  fmt::print(stderr, "backplane: unknown command '{}'\n\n{}", command, kUsage);
  return 2;
}
