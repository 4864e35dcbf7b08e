// `backplane trace summary` against traces whose figures are known, and
// BACKPLANE_TRACE recording the tool's own discovery.
#include "support/run_command.hpp"
#include "support/temp_dir.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <utility>

using backplane::testing::CommandResult;
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

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

CommandResult summary_of(const std::filesystem::path& path, const std::string& options = "") {
  return run_command("timeout 60 " + kTool + " trace summary '" + path.string() + "'" + options + " 2>&1");
}

// The tool's peak resident size, in bytes, summarising `path` in a child of
// its own (so no other command's figure mixes in).
long peak_resident_bytes(const std::filesystem::path& path) {
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    const int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, 1);
    ::execl(kTool.c_str(), kTool.c_str(), "trace", "summary", path.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  struct rusage usage {};
  REQUIRE(::wait4(child, &status, 0, &usage) == child);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  return usage.ru_maxrss * 1024;
}

}  // namespace

TEST_CASE("[cli] trace summary of a FIFO says so at once instead of waiting for a writer") {
  TempDir directory;
  const auto fifo = directory.path() / "trace.fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const CommandResult result = summary_of(fifo);  // `timeout` turns a hang into status 124
  CHECK(result.exit_status == 1);
  CHECK(contains(result.output, "trace.fifo is a FIFO (named pipe), not a regular file"));
}

TEST_CASE("[cli] trace summary of a file it cannot open says why") {
  TempDir directory;
  const CommandResult missing = summary_of(directory.path() / "missing.json");
  CHECK(missing.exit_status == 1);
  CHECK(contains(missing.output,
                 "cannot open " + (directory.path() / "missing.json").string() + ": No such file or directory"));
  const CommandResult folder = summary_of(directory.path());
  CHECK(folder.exit_status == 1);
  CHECK(contains(folder.output, "is a directory, not a regular file"));
}

TEST_CASE("[cli] trace summary refuses args nested 100,000 deep with a short message naming the place") {
  TempDir directory;
  const auto path = directory.path() / "deep.json";
  std::ofstream(path) << R"({"traceEvents":[{"ph":"X","cat":"gather","name":"g","ts":0,"dur":1,"args":{"a":)"
                      << std::string(100000, '[') << std::string(100000, ']') << "}}]}";
  const CommandResult result = summary_of(path);
  CHECK(result.exit_status == 1);  // not a crash (status -1 from a signal)
  CHECK(contains(result.output, "traceEvents[0].args.a[0][0]"));
  CHECK(contains(result.output, "nested more than 64 levels deep"));
  CHECK(result.output.size() < 300);
}

TEST_CASE("[cli] trace summary names a field of the wrong type, and a count that is negative") {
  TempDir directory;
  const auto negative = directory.path() / "negative.json";
  std::ofstream(negative) << R"({"traceEvents":[],"otherData":{"dropped_events":-5}})";
  const CommandResult dropped = summary_of(negative);
  CHECK(dropped.exit_status == 1);
  CHECK(contains(dropped.output, "otherData.dropped_events is -5, not a count of events"));
  CHECK_FALSE(contains(dropped.output, "18446744073709551611"));
  const auto typed = directory.path() / "typed.json";
  std::ofstream(typed) << R"({"traceEvents":[{"ph":"X","cat":"gather"},{"ph":"X","cat":"gather","ts":"soon"}]})";
  const CommandResult wrong = summary_of(typed);
  CHECK(wrong.exit_status == 1);
  CHECK(contains(wrong.output, "traceEvents[1].ts is a string, not a number"));
  const auto broken = directory.path() / "broken.json";
  std::ofstream(broken) << R"({"traceEvents":[{"ph":"X",}]})";
  CHECK(contains(summary_of(broken).output, "not valid JSON at byte 27: syntax error"));  // the 27th byte, "}"
}

TEST_CASE("[cli] trace summary shows device names holding terminal escapes escaped") {
  TempDir directory;
  const auto path = directory.path() / "escapes.json";
  json events = json::array();
  events.push_back(event("host_to_device", "device_put", 0, 10, {{"bytes", 100}, {"device", "\x1b[2Jevil\x07"}}));
  std::ofstream(path) << json{{"traceEvents", events}}.dump();
  const CommandResult text = summary_of(path);
  REQUIRE(text.exit_status == 0);
  CHECK_FALSE(contains(text.output, "\x1b"));
  CHECK(contains(text.output, "\"\\x1b[2Jevil\\x07\""));
  const CommandResult as_json = run_command(kTool + " trace summary --json " + path.string());
  REQUIRE(as_json.exit_status == 0);
  CHECK(json::parse(as_json.output)["devices"].contains("\x1b[2Jevil\x07"));
}

TEST_CASE("[cli] trace summary gives each batch stream its own stall row") {
  TempDir directory;
  const auto path = directory.path() / "streams.json";
  json events = json::array();
  // Stream 1 waits 100 of 400 us; stream 2 waits 300 of 400 us.
  for (int step = 0; step < 4; ++step) {
    for (const int stream : {1, 2}) {
      const double at = 1000 * stream + step * 100;
      events.push_back(event("batch_stream", "step", at, 100, {{"step", step}, {"stream", stream}}));
      events.push_back(event("batch_stream", "wait", at, stream == 1 ? 25 : 75, {{"step", step}, {"stream", stream}}));
    }
  }
  std::ofstream(path) << json{{"traceEvents", events}}.dump();
  const CommandResult as_json = run_command(kTool + " trace summary --json " + path.string());
  REQUIRE(as_json.exit_status == 0);
  const json summary = json::parse(as_json.output);
  CHECK(summary["streams"]["1"]["data_stall_fraction"].get<double>() == doctest::Approx(0.25));
  CHECK(summary["streams"]["2"]["data_stall_fraction"].get<double>() == doctest::Approx(0.75));
  CHECK(summary["streams"]["2"]["step"]["events"] == 4);
  const CommandResult text = summary_of(path);
  REQUIRE(text.exit_status == 0);
  CHECK(contains(text.output, "batch streams:"));
  CHECK(contains(text.output, "0.2500"));
  CHECK(contains(text.output, "0.7500"));
}

TEST_CASE("[cli] trace summary reads a large trace in memory independent of its size") {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  MESSAGE("skipped: a sanitizer's shadow memory is not the tool's");
  return;
#endif
  TempDir directory;
  const auto small = directory.path() / "small.json";
  const auto large = directory.path() / "large.json";
  const std::string one =
      event("host_to_device", "device_put", 1234.5, 1.25, {{"bytes", 4096}, {"device", "sim:0"}, {"route", "staged"}})
          .dump();
  for (const auto& [path, events] : {std::pair{small, 1000}, std::pair{large, 150000}}) {
    std::ofstream out(path);
    out << "{\"traceEvents\":[\n" << one;
    for (int index = 1; index < events; ++index) out << ",\n" << one;
    out << "\n]}";
  }
  const auto large_size = static_cast<long>(std::filesystem::file_size(large));
  REQUIRE(large_size > 20'000'000);
  const long baseline = peak_resident_bytes(small);
  const long peak = peak_resident_bytes(large);
  INFO("peak " << peak << " bytes for a " << large_size << "-byte file; " << baseline << " for a small one");
  // A parse into a tree took about 11 times the file (230 MB here); a
  // stream takes what the tool takes anyway, plus a buffer.
  CHECK(peak < baseline + 8'000'000);
}

TEST_CASE("[cli] trace summary says what is missing from a file that is JSON but no trace") {
  TempDir directory;
  const auto check = [&](const std::string& text, const std::string& expected) {
    CAPTURE(text);
    const auto path = directory.path() / "not-a-trace.json";
    std::ofstream(path) << text;
    const CommandResult result = summary_of(path);
    CHECK(result.exit_status == 1);
    CHECK(contains(result.output, "is not a readable trace: " + expected));
  };
  check(R"({"otherData":{}})", "no 'traceEvents' array");
  check(R"({"traceEvents":"all of them"})", "'traceEvents' is a string, not an array");
  check(R"({"traceEvents":{}})", "'traceEvents' is an object, not an array");
  check("42", "the file is a JSON number, not a trace");
  check(R"({"traceEvents":[{"ph":"X","cat":7}]})", "traceEvents[0].cat is a number, not a string");
  std::string many = R"({"traceEvents":[)";
  for (int device = 0; device <= 10000; ++device) {
    many +=
        (device == 0 ? "" : ",") + event("allocation", "allocate", 0, 1, {{"device", std::to_string(device)}}).dump();
  }
  check(many + "]}", "more than 10000 distinct devices (at traceEvents[10000])");
}

TEST_CASE("[cli] BACKPLANE_TRACE with %r names one file per local rank; one shared name is a warning") {
  TempDir directory;
  const std::string environment = "env -u BACKPLANE_CONFIG BACKPLANE_PROBE_ISOLATION=none LOCAL_RANK=2 ";
  const auto per_rank = directory.path() / "info-%r.json";
  auto result = run_command(environment + "BACKPLANE_TRACE=" + per_rank.string() + " " + kTool + " info 2>&1");
  REQUIRE(result.exit_status == 0);
  CHECK(std::filesystem::exists(directory.path() / "info-2.json"));
  CHECK_FALSE(contains(result.output, "writes the same file"));
  const auto shared = directory.path() / "shared.json";
  result = run_command(environment + "BACKPLANE_TRACE=" + shared.string() + " " + kTool + " info 2>&1");
  REQUIRE(result.exit_status == 0);
  CHECK(contains(result.output, "every process of this job (LOCAL_RANK=2) writes the same file"));
  CHECK(contains(result.output, "put %r (the local rank) or %p (the process id) in the name"));
}
