// `backplane trace summary` against traces whose figures are known, and
// BACKPLANE_TRACE recording the tool's own discovery.
#include "support/run_command.hpp"
#include "support/temp_dir.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <string>

using backplane::testing::run_command;
using backplane::testing::TempDir;
using nlohmann::json;

namespace {

const std::string kTool = BP_TEST_TOOL;

json event(const std::string& category, const std::string& name, double ts, double dur, json args) {
  return {{"name", name}, {"cat", category}, {"ph", "X"}, {"ts", ts},
          {"dur", dur},   {"pid", 1},        {"tid", 2},  {"args", std::move(args)}};
}

// Two uploads to sim:0 (3 MB in 2000 us: 1.5 GB/s), a download, an
// allocation, and a batch stream of 4 steps over 1000 us with 250 us of waits.
json known_trace() {
  json events = json::array();
  events.push_back(
      event("host_to_device", "device_put", 0, 1000, {{"bytes", 1000000}, {"target", "sim:0"}, {"device", "sim:0"}}));
  events.push_back(event("host_to_device", "take_windows", 2000, 1000, {{"bytes", 2000000}, {"device", "sim:0"}}));
  events.push_back(event("device_to_host", "device_put", 4000, 500,
                         {{"bytes", 500000}, {"source", "sim:0"}, {"target", "cpu:0"}, {"device", "cpu:0"}}));
  events.push_back(event("allocation", "allocate", 10, 20, {{"bytes", 4096}, {"device", "sim:0"}}));
  events.push_back(event("discovery", "discover sim", 0, 5, {{"status", "available"}}));
  for (int step = 0; step < 4; ++step) {
    const double at = 10000 + step * 250;
    events.push_back(event("batch_stream", "step", at, 250, {{"step", step}}));
    events.push_back(event("batch_stream", "wait", at, step == 0 ? 100 : 50, {{"step", step}}));
    events.push_back(event("batch_stream", "gather", at, 20, {{"step", step}, {"windows", 8}, {"bytes", 1024}}));
  }
  events.push_back(
      {{"name", "c"}, {"cat", "memory"}, {"ph", "C"}, {"ts", 1}, {"pid", 1}, {"tid", 0}, {"args", {{"in_use", 5}}}});
  return {{"traceEvents", events}, {"displayTimeUnit", "ms"}, {"otherData", {{"dropped_events", 3}}}};
}

}  // namespace

TEST_CASE("[cli] trace summary --json agrees with the events in the file") {
  TempDir directory;
  const auto path = directory.path() / "known.json";
  std::ofstream(path) << known_trace().dump();
  auto result = run_command(kTool + " trace summary " + path.string() + " --json");
  REQUIRE(result.exit_status == 0);
  const json summary = json::parse(result.output);
  const json& upload = summary["devices"]["sim:0"]["host_to_device"];
  CHECK(upload["events"] == 2);
  CHECK(upload["bytes"] == 3000000);
  CHECK(upload["time_us"].get<double>() == doctest::Approx(2000));
  CHECK(upload["gbps"].get<double>() == doctest::Approx(1.5));
  CHECK(summary["devices"]["sim:0"]["allocation"]["bytes"] == 4096);
  CHECK(summary["devices"]["cpu:0"]["device_to_host"]["gbps"].get<double>() == doctest::Approx(1.0));
  CHECK_FALSE(summary["devices"]["sim:0"].contains("discovery"));
  CHECK(summary["dropped_events"] == 3);
  const json& stream = summary["batch_stream"];
  CHECK(stream["step"]["events"] == 4);
  CHECK(stream["gather"]["bytes"] == 4096);
  CHECK(stream["wait"]["time_us"].get<double>() == doctest::Approx(250));
  CHECK(stream["data_stall_fraction"].get<double>() == doctest::Approx(0.25));
}

TEST_CASE("[cli] trace summary prints a table, and refuses what is not a trace") {
  TempDir directory;
  const auto path = directory.path() / "known.json";
  std::ofstream(path) << known_trace().dump();
  auto result = run_command(kTool + " trace summary " + path.string());
  REQUIRE(result.exit_status == 0);
  CHECK(result.output.find("host_to_device") != std::string::npos);
  CHECK(result.output.find("data_stall_fraction 0.2500") != std::string::npos);
  const auto broken = directory.path() / "broken.json";
  std::ofstream(broken) << "{\"traceEvents\": [";
  CHECK(run_command(kTool + " trace summary " + broken.string() + " 2>&1").exit_status == 1);
  CHECK(run_command(kTool + " trace 2>&1").exit_status == 2);
}

TEST_CASE("[cli] BACKPLANE_TRACE records the tool's plugin discovery") {
  TempDir directory;
  const auto path = directory.path() / "info.json";
  auto result = run_command("env -u BACKPLANE_CONFIG BACKPLANE_PROBE_ISOLATION=none BACKPLANE_TRACE=" + path.string() +
                            " " + kTool + " info --json");
  REQUIRE(result.exit_status == 0);
  std::ifstream in(path);
  const json trace = json::parse(in);
  bool cpu = false;
  for (const json& event : trace["traceEvents"]) {
    if (event["cat"] == "discovery" && event["name"] == "discover cpu") cpu = event["args"]["status"] == "available";
  }
  CHECK(cpu);
}
