// `backplane info` as a user runs it, with the build's plugins: opencl is
// listed with its status, its reason and, where available, each device and
// its attributes.
#include "support/run_command.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <string>

using backplane::testing::run_command;
using nlohmann::json;

namespace {

std::string tool(const std::string& variables, const std::string& args) {
  return "env -u BACKPLANE_PLUGIN_PATH -u BACKPLANE_CONFIG -u BACKPLANE_BACKENDS -u BACKPLANE_DEFAULT_DEVICE "
         "-u BACKPLANE_LOG -u PJRT_NAMES_AND_LIBRARY_PATHS BACKPLANE_PYTHON= XDG_CONFIG_HOME=/nonexistent " +
         variables + " " + BP_TEST_TOOL + " " + args;
}

const json* opencl_of(const json& info) {
  for (const auto& backend : info["backends"]) {
    if (backend["name"] == "opencl") return &backend;
  }
  return nullptr;
}

}  // namespace

TEST_CASE("[opencl][cli] info lists opencl with its devices and their attributes") {
  auto result = run_command(tool("", "info --json"));
  REQUIRE(result.exit_status == 0);
  const json info = json::parse(result.output);
  const json* opencl = opencl_of(info);
  REQUIRE(opencl != nullptr);
  if ((*opencl)["status"] != "available") {
    MESSAGE("skipped: opencl is " << (*opencl)["status"] << ": " << (*opencl)["reason"]);
    return;
  }
  CHECK((*opencl)["capabilities"] ==
        json::array({"pinned_host", "async", "convert_integers", "event_timing", "probe_in_child"}));
  REQUIRE((*opencl)["devices"].size() >= 1);
  const json& device = (*opencl)["devices"][0];
  CHECK(device["selector"] == "opencl:0");
  for (const char* key : {"vendor", "platform", "opencl_version", "driver_version", "device_type", "global_memory_size",
                          "max_allocation_size", "compute_units"}) {
    CHECK_MESSAGE(device["attributes"].contains(key), key);
  }
  if (device["attributes"]["platform"] == "Portable Computing Language") {  // PoCL, as in CI
    CHECK(device["attributes"]["device_type"] == "CPU");
    CHECK((*opencl)["priority"] == 5);
    CHECK(std::string((*opencl)["reason"]).find("CPU devices only, so priority 5 (below cpu)") != std::string::npos);
  }
  // The text form names it too.
  auto text = run_command(tool("", "info"));
  CHECK(text.output.find("opencl   available") != std::string::npos);
  CHECK(text.output.find("opencl:0") != std::string::npos);
}

TEST_CASE("[opencl][cli] info says why opencl is unavailable when the loader finds no driver") {
  auto result = run_command(tool("OCL_ICD_VENDORS=/nonexistent/backplane-test-vendors", "info"));
  REQUIRE(result.exit_status == 0);
  INFO(result.output);
  CHECK(result.output.find("opencl   unavailable") != std::string::npos);
  CHECK(result.output.find("no OpenCL platforms") != std::string::npos);
  CHECK(result.output.find("OCL_ICD_VENDORS=\"/nonexistent/backplane-test-vendors\"") != std::string::npos);
}
