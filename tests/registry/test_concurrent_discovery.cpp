// Discovery probes plugins concurrently, in process and in probe helper
// processes, and still reports them in search order. The rendezvous fixtures
// tell without a clock: each probe is available only if it saw the other's
// probe start while it waited (at most 10 s), so probed one after another the
// first is unavailable, with a reason saying it timed out waiting.
#include "support/temp_dir.hpp"

#include <backplane/backplane.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

using backplane::BackendInfo;
using backplane::BackendStatus;
using backplane::ProbeIsolation;
using backplane::Runtime;
using backplane::testing::TempDir;

namespace {

const std::filesystem::path kRendezvousDir = BP_TEST_RENDEZVOUS_DIR;
const std::filesystem::path kPluginDir = BP_TEST_PLUGIN_DIR;

// rendezvous_a and rendezvous_b meeting in `meeting`, then the real plugins.
// rendezvous_a returns only after rendezvous_b is about to: the probes finish
// in the reverse of the search order.
Runtime::Options rendezvous_options(const TempDir& meeting, ProbeIsolation isolation) {
  Runtime::Options options;
  options.plugin_paths = {kRendezvousDir, kPluginDir};
  options.skip_default_paths = true;
  // The probe deadline must not end a probe that waits its 10 s in vain.
  options.environment = std::map<std::string, std::string>{{"BACKPLANE_PROBE_TIMEOUT_MS", "60000"}};
  options.backend_options["rendezvous_a"] = {{"dir", meeting.path().string()}, {"leave_after_peer", "1"}};
  options.backend_options["rendezvous_b"] = {{"dir", meeting.path().string()}};
  options.probe_isolation = isolation;
  return options;
}

std::vector<std::filesystem::path> plugin_files(const Runtime& runtime) {
  std::vector<std::filesystem::path> files;
  for (const BackendInfo& info : runtime.backends()) files.push_back(info.plugin_path);
  return files;
}

// The search order: the rendezvous directory, then the plugin directory, each
// sorted by file name.
std::vector<std::filesystem::path> search_order() {
  std::vector<std::filesystem::path> files;
  for (const auto& dir : {kRendezvousDir, kPluginDir}) {
    std::vector<std::filesystem::path> in_dir;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      const std::string name = entry.path().filename().string();
      if (name.starts_with("backplane-") && name.ends_with(".so")) in_dir.push_back(entry.path());
    }
    std::sort(in_dir.begin(), in_dir.end());
    files.insert(files.end(), in_dir.begin(), in_dir.end());
  }
  return files;
}

void check_both_met(const Runtime& runtime) {
  const std::vector<BackendInfo>& backends = runtime.backends();
  REQUIRE(backends.size() >= 3);
  CHECK(backends[0].name == "rendezvous_a");
  CHECK(backends[0].reason == "saw rendezvous_b's probe start while probing");
  CHECK(backends[0].status == BackendStatus::kAvailable);
  CHECK(backends[1].name == "rendezvous_b");
  CHECK(backends[1].reason == "saw rendezvous_a's probe start while probing");
  CHECK(backends[1].status == BackendStatus::kAvailable);
  CHECK(plugin_files(runtime) == search_order());
  CHECK(runtime.is_available("cpu"));
}

}  // namespace

TEST_CASE("[discovery] plugins are probed concurrently in process, and listed in search order") {
  TempDir meeting;
  Runtime runtime(rendezvous_options(meeting, ProbeIsolation::kNone));
  check_both_met(runtime);
}

TEST_CASE("[discovery] isolation: the probe helpers run concurrently, and plugins are listed in search order") {
  TempDir meeting;
  Runtime runtime(rendezvous_options(meeting, ProbeIsolation::kProcess));
  check_both_met(runtime);
}

TEST_CASE("[discovery] a rendezvous probe with nobody to meet is unavailable after its wait, and says why") {
  // Only rendezvous_a: nobody arrives, and the reason says what it waited for.
  TempDir meeting;
  Runtime::Options options;
  options.plugin_paths = {kRendezvousDir / "backplane-rendezvous_a.so"};
  options.skip_default_paths = true;
  options.environment = std::map<std::string, std::string>{{"BACKPLANE_PROBE_TIMEOUT_MS", "60000"}};
  options.backend_options["rendezvous_a"] = {{"dir", meeting.path().string()}};
  Runtime runtime(options);
  REQUIRE(runtime.backends().size() == 1);
  CHECK(runtime.backends()[0].status == BackendStatus::kUnavailable);
  CHECK(runtime.backends()[0].reason ==
        "timed out after 10 s waiting for rendezvous_b's probe to start: the probes did not run at once");
}
