// Reading a trace file in tests: the JSON, its complete events per track, and
// the checks every trace must pass. Header-only; needs doctest and nlohmann.
#pragma once

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <string_view>
#include <utility>
#include <vector>

namespace backplane::testing {

inline nlohmann::json read_json(const std::filesystem::path& path) {
  std::ifstream in(path);
  REQUIRE(in.good());
  return nlohmann::json::parse(in);  // throws on invalid JSON
}

inline std::int64_t nanoseconds(const nlohmann::json& microseconds) {
  return std::llround(microseconds.get<double>() * 1000.0);
}

// Complete events on one (pid, tid) nest or follow each other: none starts
// inside another and ends after it (Perfetto cannot draw that).
inline void check_no_overlap(const nlohmann::json& file) {
  std::map<std::pair<std::int64_t, std::int64_t>, std::vector<std::pair<std::int64_t, std::int64_t>>> tracks;
  for (const nlohmann::json& event : file["traceEvents"]) {
    if (event["ph"] != "X") continue;
    const std::int64_t begin = nanoseconds(event["ts"]);
    tracks[{event["pid"].get<std::int64_t>(), event["tid"].get<std::int64_t>()}].emplace_back(
        begin, begin + nanoseconds(event["dur"]));
  }
  for (auto& [track, spans] : tracks) {
    // By begin, the longer first, so an enclosing event precedes what it holds.
    std::sort(spans.begin(), spans.end(), [](const auto& left, const auto& right) {
      return left.first != right.first ? left.first < right.first : left.second > right.second;
    });
    std::vector<std::int64_t> open;  // ends of the enclosing events
    for (const auto& [begin, end] : spans) {
      while (!open.empty() && open.back() <= begin) open.pop_back();
      INFO("tid " << track.second << " at " << begin);
      CHECK((open.empty() || end <= open.back()));
      open.push_back(end);
    }
  }
}

inline std::vector<nlohmann::json> events_of(const nlohmann::json& file, std::string_view category) {
  std::vector<nlohmann::json> found;
  for (const nlohmann::json& event : file["traceEvents"]) {
    if (event["cat"] == category) found.push_back(event);
  }
  return found;
}

// The names of the file's tracks, by tid.
inline std::map<std::int64_t, std::string> track_names(const nlohmann::json& file) {
  std::map<std::int64_t, std::string> names;
  for (const nlohmann::json& event : file["traceEvents"]) {
    if (event["ph"] == "M" && event["name"] == "thread_name") {
      names[event["tid"].get<std::int64_t>()] = event["args"]["name"].get<std::string>();
    }
  }
  return names;
}

// Checks the device times of the `category` transfers to or from `device`
// (the device that timed them) and returns how many carried them: each has device_begin_us <= device_end_us,
// lies within the host-observed event (ts .. ts + dur) give or take
// `tolerance_us`, and has its twin on a "DEVICE device time #k" lane with the
// same span.
inline int check_device_times(const nlohmann::json& file, std::string_view category, std::string_view device,
                              double tolerance_us) {
  const auto names = track_names(file);
  const auto events = events_of(file, category);
  int timed = 0;
  for (const nlohmann::json& event : events) {
    const nlohmann::json& args = event["args"];
    if (!args.contains("device_begin_us") || (args["target"] != device && args["source"] != device)) continue;
    const std::string lane = names.at(event["tid"].get<std::int64_t>());
    if (lane.find("device time") != std::string::npos) continue;  // a twin, checked below
    INFO(event.dump());
    ++timed;
    const double begin = args["device_begin_us"].get<double>();
    const double end = args["device_end_us"].get<double>();
    CHECK(begin <= end);
    CHECK(args["device_dur_us"].get<double>() == doctest::Approx(end - begin).epsilon(1e-6));
    const double host_begin = event["ts"].get<double>();
    const double host_end = host_begin + event["dur"].get<double>();
    CHECK(begin >= host_begin - tolerance_us);
    CHECK(end <= host_end + tolerance_us);
    const bool twin = std::any_of(events.begin(), events.end(), [&](const nlohmann::json& other) {
      return names.at(other["tid"].get<std::int64_t>()).rfind(std::string(device) + " device time #", 0) == 0 &&
             std::abs(other["ts"].get<double>() - begin) < 0.002 &&
             std::abs(other["ts"].get<double>() + other["dur"].get<double>() - end) < 0.002 &&
             other["args"]["bytes"] == args["bytes"];
    });
    CHECK(twin);
  }
  return timed;
}

// True when no event of the file carries device times.
inline bool has_no_device_times(const nlohmann::json& file) {
  for (const nlohmann::json& event : file["traceEvents"]) {
    if (event.contains("args") && event["args"].contains("device_begin_us")) return false;
  }
  return true;
}

}  // namespace backplane::testing
