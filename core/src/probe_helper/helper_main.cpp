// backplane-probe: loads, creates and probes one plugin in a process of its
// own, for discovery with BACKPLANE_PROBE_ISOLATION=process. Started only by
// the core (isolation/probe_process.cpp), never by hand:
//
//   backplane-probe PARENT_PID PLUGIN_FILE EXPECTED_NAME [KEY VALUE]...
//
// It writes records (isolation/probe_protocol.hpp) to file descriptor 3: the
// stage about to run, then the status and reason the plugin earns. If the
// plugin crashes, exits or hangs, the parent sees the last stage and how this
// process ended. Nothing is unloaded or destroyed at the end: _exit follows
// the verdict, so a plugin's destructors cannot spoil it.
#include "isolation/probe_protocol.hpp"
#include "loader/plugin_library.hpp"
#include "registry/probe_call.hpp"
#include "util/caught_error.hpp"

#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <string>

namespace {

using backplane::detail::isolation::kResultFd;
using backplane::detail::isolation::write_record;

[[noreturn]] void report(backplane::BackendStatus status, const std::string& reason, const std::string& abi,
                         std::string_view name) {
  write_record(kResultFd, "status", std::to_string(static_cast<int>(status)));
  write_record(kResultFd, "reason", reason);
  write_record(kResultFd, "abi", abi);
  write_record(kResultFd, "name", name);
  write_record(kResultFd, "done", "");
  ::_exit(0);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4 || (argc - 4) % 2 != 0) return 2;
  // Die with the process that asked (it may be killed while we probe).
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (std::to_string(::getppid()) != argv[1]) return 3;
  ::signal(SIGPIPE, SIG_IGN);

  backplane::detail::PluginOptions options;
  for (int index = 4; index + 1 < argc; index += 2) options.emplace_back(argv[index], argv[index + 1]);
  try {
    write_record(kResultFd, "stage", "load");
    backplane::detail::OpenedPlugin opened = backplane::detail::open_plugin(argv[2], argv[3]);
    if (opened.status != backplane::BackendStatus::kAvailable) {
      report(opened.status, opened.reason, opened.abi_version, "");
    }
    const auto outcome = backplane::detail::create_and_probe(
        opened.library, options, [](const char* stage) { write_record(kResultFd, "stage", stage); });
    const auto verdict = backplane::detail::verdict_of(outcome);
    report(verdict.status, verdict.reason, opened.abi_version, opened.library->name());
  } catch (...) {
    report(backplane::BackendStatus::kFailed, backplane::detail::caught_error().message, "", "");
  }
}
