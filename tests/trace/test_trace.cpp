// The trace recorder: the file it writes, its bounds, its threads, and the
// events the placement hooks record.
#include "support/placement_fixture.hpp"
#include "support/temp_dir.hpp"
#include "support/trace_file.hpp"
#include "trace/trace.hpp"

#include <backplane/trace.hpp>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include <time.h>

namespace backplane::testing {
namespace {

namespace trace = detail::trace;
using nlohmann::json;

// Every event has the fields a viewer needs; complete events have a duration.
void check_fields(const json& file) {
  REQUIRE(file.contains("traceEvents"));
  CHECK(file["displayTimeUnit"] == "ms");
  for (const json& event : file["traceEvents"]) {
    for (const char* field : {"name", "cat", "ph", "ts", "pid", "tid"}) {
      INFO(event.dump());
      CHECK(event.contains(field));
    }
    if (event["ph"] == "X") {
      REQUIRE(event.contains("dur"));
      CHECK(event["dur"].get<double>() >= 0);
    }
  }
}

// Stops the trace when a test ends, also when it failed half-way, so the
// next test can start its own.
struct StopAtEnd {
  ~StopAtEnd() {
    try {
      trace_stop();
    } catch (const Error&) {
    }
  }
};

TEST_CASE("[trace] device_put and take_windows on cpu and sim are on the timeline") {
  const StopAtEnd stop_at_end;
  TempDir directory;
  const auto path = directory.path() / "out.json";
  trace_start(path);
  CHECK(trace_active() == path);
  {
    Runtime runtime(placement_options());                 // discovery happens while tracing
    const auto bytes = random_bytes((12u << 20) + 5, 3);  // the staged ring: 8 MiB chunks
    Array source = u8_array(runtime, kCpu0, bytes);
    device_put(runtime, source, kSim0).block_until_ready();
    device_put(runtime, source, kCpu1).block_until_ready();
    Array small = u8_array(runtime, kCpu0, random_bytes(4096, 4));
    device_put(runtime, device_put(runtime, small, kSim0), kCpu2).block_until_ready();

    std::vector<std::uint16_t> token_values(10000);
    for (std::size_t index = 0; index < token_values.size(); ++index) {
      token_values[index] = static_cast<std::uint16_t>(index);
    }
    Array tokens = Array::from_host(runtime, kCpu0, DType::kU16, {10000}, token_values.data(), 20000);
    const std::vector<std::int64_t> offsets{0, 100, 2000, 5000};
    take_windows(runtime, tokens, offsets, 65, kSim0, DType::kI64).block_until_ready();
    take_windows(runtime, tokens, offsets, 65, kCpu1, DType::kI64).block_until_ready();
  }
  CHECK(trace_stop() == path);
  CHECK_FALSE(trace_active());
  CHECK_FALSE(trace_stop());  // nothing recorded now

  const json file = read_json(path);
  check_fields(file);
  check_no_overlap(file);
  CHECK(file["otherData"]["dropped_events"] == 0);

  const auto discovery = events_of(file, "discovery");
  CHECK(std::any_of(discovery.begin(), discovery.end(), [](const json& event) {
    return event["name"] == "discover sim" && event["args"]["status"] == "available";
  }));
  const auto allocations = events_of(file, "allocation");
  CHECK(std::any_of(allocations.begin(), allocations.end(), [](const json& event) {
    return event["name"] == "allocate" && event["args"]["device"] == "sim:0" && event["args"]["bytes"] >= 12u << 20;
  }));
  const auto uploads = events_of(file, "host_to_device");
  CHECK(std::any_of(uploads.begin(), uploads.end(), [](const json& event) {
    return event["name"] == "device_put" && event["args"]["bytes"] == (12u << 20) + 5 &&
           event["args"]["route"] == "staged" && event["args"]["target"] == "sim:0" &&
           event["args"]["gbps"].get<double>() > 0 && event["dur"].get<double>() > 0;
  }));
  CHECK(std::any_of(uploads.begin(), uploads.end(), [](const json& event) {
    return event["name"] == "take_windows" && event["args"]["target"] == "sim:0";
  }));
  const auto downloads = events_of(file, "device_to_host");
  CHECK(std::any_of(downloads.begin(), downloads.end(), [](const json& event) {
    return event["args"]["bytes"] == 4096 && event["args"]["source"] == "sim:0";
  }));
  const auto gathers = events_of(file, "gather");
  CHECK(gathers.size() == 2);
  for (const json& gather : gathers) CHECK(gather["args"]["windows"] == 4);
  CHECK(events_of(file, "staging").size() >= 2);  // the 12 MiB upload's chunks
  bool counted = false;
  for (const json& event : file["traceEvents"]) {
    if (event["ph"] == "C" && event["name"] == "device memory sim:0") counted = event["args"].contains("in_use");
  }
  CHECK(counted);
  // Named tracks carry their names.
  std::set<std::string> names;
  for (const json& event : file["traceEvents"]) {
    if (event["ph"] == "M" && event["name"] == "thread_name") names.insert(event["args"]["name"]);
  }
  CHECK(names.count("sim:0 transfers #0") == 1);
  CHECK(names.count("sim:0 staging #0") == 1);
}

TEST_CASE("[trace] a failed transfer is an error instant carrying its message") {
  const StopAtEnd stop_at_end;
  TempDir directory;
  const auto path = directory.path() / "failed.json";
  trace_start(path);
  {
    Runtime runtime(placement_options({{"fail_copy_at", "1"}}));
    Array moved = device_put(runtime, u8_array(runtime, kCpu0, random_bytes(1000)), kSim0);
    CHECK_THROWS_AS(moved.block_until_ready(), Error);
  }
  trace_stop();
  const json file = read_json(path);
  check_fields(file);
  const auto errors = events_of(file, "error");
  REQUIRE(errors.size() == 1);
  CHECK(errors[0]["ph"] == "i");
  CHECK(contains(errors[0]["name"].get<std::string>(), "device_put of 1000 bytes from cpu:0 to sim:0"));
  CHECK(contains(errors[0]["args"]["message"].get<std::string>(), "injected device fault"));
}

TEST_CASE("[trace] a full buffer drops the oldest events and says how many") {
  const StopAtEnd stop_at_end;
  TempDir directory;
  const auto path = directory.path() / "bounded.json";
  trace_start(path, TraceOptions{10});
  const trace::Track lane = trace::track("bounded");
  const auto origin = trace::Clock::now();
  for (int index = 0; index < 25; ++index) {
    const auto begin = origin + std::chrono::microseconds(index * 10);
    trace::complete(lane, "test", std::to_string(index), begin, begin + std::chrono::microseconds(5));
  }
  trace_stop();
  const json file = read_json(path);
  check_fields(file);
  CHECK(file["otherData"]["dropped_events"] == 15);
  CHECK(file["otherData"]["capacity"] == 10);
  std::vector<std::string> kept;
  bool reported = false;
  for (const json& event : file["traceEvents"]) {
    if (event["cat"] == "test") kept.push_back(event["name"]);
    if (event["name"] == "dropped events") reported = event["args"]["dropped_events"] == 15;
  }
  CHECK(kept == std::vector<std::string>{"15", "16", "17", "18", "19", "20", "21", "22", "23", "24"});
  CHECK(reported);
}

TEST_CASE("[trace] text is escaped into valid JSON, bytes that are not UTF-8 replaced") {
  const StopAtEnd stop_at_end;
  TempDir directory;
  const auto path = directory.path() / "escaped.json";
  trace_start(path);
  trace::instant({}, "error", "quote \" backslash \\ newline \n tab \t bell \x07 bad \xff end",
                 {{"message", std::string("caf\xc3\xa9 \xed\xa0\x80")}, {"ratio", 0.5}, {"inf", HUGE_VAL}});
  trace_stop();
  const json file = read_json(path);
  check_fields(file);
  const auto errors = events_of(file, "error");
  REQUIRE(errors.size() == 1);
  CHECK(errors[0]["name"] == "quote \" backslash \\ newline \n tab \t bell \x07 bad \xef\xbf\xbd end");
  CHECK(errors[0]["args"]["message"] == "caf\xc3\xa9 \xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
  CHECK(errors[0]["args"]["ratio"] == 0.5);
  CHECK(errors[0]["args"]["inf"].is_null());
}

TEST_CASE("[trace] starting twice, or to a path that cannot be written, is an error") {
  const StopAtEnd stop_at_end;
  TempDir directory;
  CHECK(error_from([&] { trace_start(directory.path() / "missing" / "out.json"); }).code() == ErrorCode::kIo);
  CHECK_FALSE(trace_active());
  trace_start(directory.path() / "first.json");
  const Error twice = error_from([&] { trace_start(directory.path() / "second.json"); });
  CHECK(twice.code() == ErrorCode::kInvalidArgument);
  CHECK(contains(twice.what(), "first.json"));
  trace_stop();
}

TEST_CASE("[trace] a capacity of 0 is the default capacity, as in C and Python") {
  const StopAtEnd stop_at_end;
  TempDir directory;
  trace_start(directory.path() / "zero.json", TraceOptions{0});
  trace_stop();
  CHECK(read_json(directory.path() / "zero.json")["otherData"]["capacity"] == kDefaultTraceCapacity);
  trace_start(directory.path() / "default.json");
  trace_stop();
  CHECK(read_json(directory.path() / "default.json")["otherData"]["capacity"] == kDefaultTraceCapacity);
  CHECK(kDefaultTraceCapacity == 1048576);
}

TEST_CASE("[trace] concurrency: threads record while the trace stops under them") {
  const StopAtEnd stop_at_end;
  TempDir directory;
  const auto path = directory.path() / "threads.json";
  trace_start(path);
  std::atomic<bool> go{true};
  std::atomic<int> recorded{0};
  std::vector<std::thread> threads;
  for (int thread = 0; thread < 6; ++thread) {
    threads.emplace_back([&, thread] {
      const trace::Track own = trace::track("worker " + std::to_string(thread));
      for (int index = 0; go.load() || index < 200; ++index) {
        auto scope = trace::Span::nested("test", "scoped");
        const auto begin = trace::Clock::now();
        trace::complete(own, "test", "named", begin, trace::Clock::now(), {{"index", index}});
        const trace::LaneHold lane("shared");
        trace::complete(lane.track(), "test", "lane", trace::Clock::now(), trace::Clock::now());
        trace::counter("count", {{"value", index}});
        recorded.fetch_add(1);
        if (index > 100000) break;
      }
    });
  }
  while (recorded.load() < 600) std::this_thread::yield();
  trace_stop();  // while the threads still record
  go.store(false);
  for (auto& thread : threads) thread.join();
  const json file = read_json(path);
  check_fields(file);
  check_no_overlap(file);
  CHECK(events_of(file, "test").size() >= 600);
}

TEST_CASE("[trace] steady_clock reads CLOCK_MONOTONIC, the clock plugins report device times on") {
  // Read between two CLOCK_MONOTONIC readings, steady_clock's time lies
  // between them only if it is that clock (another clock's epoch is far off).
  timespec before{};
  timespec after{};
  clock_gettime(CLOCK_MONOTONIC, &before);
  const auto steady = trace::Clock::now();
  clock_gettime(CLOCK_MONOTONIC, &after);
  const auto as_ns = [](const timespec& time) { return std::int64_t{time.tv_sec} * 1'000'000'000 + time.tv_nsec; };
  CHECK(trace::from_monotonic_ns(as_ns(before)) <= steady);
  CHECK(steady <= trace::from_monotonic_ns(as_ns(after)));
}

TEST_CASE("[trace] plugins without event_timing (cpu, sim, ABI 1.0 and 1.1) trace transfers with host times") {
  for (const char* directory : {"", BP_TEST_ABI_1_0_DIR, BP_TEST_ABI_1_1_DIR}) {
    CAPTURE(directory);
    const StopAtEnd stop_at_end;
    TempDir temp;
    const auto path = temp.path() / "out.json";
    trace_start(path);
    {
      Runtime::Options options = placement_options();
      if (*directory != '\0') options.plugin_paths = {directory};
      Runtime runtime(options);
      const auto bytes = random_bytes(100000, 5);
      Array source = u8_array(runtime, kCpu0, bytes);
      const Device target = *directory != '\0' ? kCpu1 : kSim0;
      CHECK(device_put(runtime, device_put(runtime, source, target), kCpu0).to_vector<std::uint8_t>() == bytes);
    }
    trace_stop();
    const json file = read_json(path);
    check_no_overlap(file);
    const auto transfers = std::count_if(file["traceEvents"].begin(), file["traceEvents"].end(),
                                         [](const json& event) { return event["name"] == "device_put"; });
    CHECK(transfers >= 2);
    CHECK(has_no_device_times(file));
    for (const auto& [tid, name] : track_names(file)) CHECK(name.find("device time") == std::string::npos);
  }
}

}  // namespace
}  // namespace backplane::testing
