// backplane-probe: loads, creates and probes one plugin in a process of its
// own, for discovery with BACKPLANE_PROBE_ISOLATION=process. Started only by
// the core (isolation/probe_process.cpp), never by hand:
//
//   backplane-probe PARENT_PID PLUGIN_FILE EXPECTED_NAME BACKEND_NAME [KEY VALUE]...
//
// BACKEND_NAME is the backend the plugin serves as (an instance's,
// "pjrt_cpu"; empty: the table's name), which messages about its answers
// name.
// It writes records (isolation/probe_protocol.hpp) to file descriptor 3: the
// stage about to run, then the status and reason the plugin earns and, for a
// table declaring BP_CAPABILITY_PROBE_IN_CHILD, what its probe found (the
// caller keeps that instead of probing). If the plugin crashes, exits or
// hangs, the parent sees the last stage and how this process ended. Nothing is unloaded or destroyed at the end: _exit
// follows the verdict, so a plugin's destructors cannot spoil it.
#include "isolation/probe_protocol.hpp"
#include "loader/plugin_library.hpp"
#include "registry/probe_call.hpp"
#include "util/caught_error.hpp"

#include <backplane/plugin.h>

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

// What the probe found, for a plugin probed only here: the answer and, when
// available, every device (a device_count or device_info that fails makes the
// plugin failed, as it would be in the caller).
void report_snapshot(const backplane::detail::ProbeOutcome& outcome, const backplane::detail::ProbeVerdict& verdict,
                     const std::string& abi, std::string_view name) {
  const backplane::detail::Backend::ProbeAnswer& answer = *outcome.answer();
  std::vector<std::string> devices;
  if (verdict.status == backplane::BackendStatus::kAvailable) {
    try {
      const int count = outcome.backend->device_count();
      for (int ordinal = 0; ordinal < count; ++ordinal) {
        write_record(kResultFd, "stage", "device_info");
        devices.push_back(backplane::detail::isolation::encode_device(outcome.backend->device_info(ordinal)));
      }
    } catch (const backplane::Error& error) {
      report(backplane::BackendStatus::kFailed, error.what(), abi, name);
    }
  }
  write_record(kResultFd, "in_child", "1");
  write_record(kResultFd, "priority", std::to_string(answer.priority));
  write_record(kResultFd, "capabilities", std::to_string(answer.capabilities));
  write_record(kResultFd, "dlpack", std::to_string(answer.dlpack_device_type));
  for (const std::string& device : devices) write_record(kResultFd, "device", device);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5 || (argc - 5) % 2 != 0) return 2;
  // Die with the process that asked (it may be killed while we probe).
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (std::to_string(::getppid()) != argv[1]) return 3;
  ::signal(SIGPIPE, SIG_IGN);

  backplane::detail::PluginOptions options;
  for (int index = 5; index + 1 < argc; index += 2) options.emplace_back(argv[index], argv[index + 1]);
  try {
    write_record(kResultFd, "stage", "load");
    backplane::detail::OpenedPlugin opened = backplane::detail::open_plugin(argv[2], argv[3]);
    if (opened.status != backplane::BackendStatus::kAvailable) {
      report(opened.status, opened.reason, opened.abi_version, "");
    }
    const auto outcome = backplane::detail::create_and_probe(
        opened.library, options, [](const char* stage) { write_record(kResultFd, "stage", stage); },
        backplane::detail::ProbeCalls{argv[4], true});
    const auto verdict = backplane::detail::verdict_of(outcome);
    if ((opened.library->api().capabilities & BP_CAPABILITY_PROBE_IN_CHILD) != 0 && outcome.answer() != nullptr) {
      report_snapshot(outcome, verdict, opened.abi_version, opened.library->name());
    }
    report(verdict.status, verdict.reason, opened.abi_version, opened.library->name());
  } catch (...) {
    report(backplane::BackendStatus::kFailed, backplane::detail::caught_error().message, "", "");
  }
}
