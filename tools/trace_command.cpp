// `backplane trace summary FILE [--json]`: what a trace file (written by
// trace_start / BACKPLANE_TRACE) says about each device: time and bytes per
// category, the achieved GB/s, and for a batch stream how long training
// waited for data. Exit status: 0 done, 1 unreadable or not a trace, 2 usage.
// docs/tracing.md describes the figures and the JSON shape, which only grows.
#include "commands.hpp"

#include <backplane/error.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <limits>
#include <map>
#include <string>

namespace backplane::tools {
namespace {

using json = nlohmann::ordered_json;

constexpr std::string_view kUsage = "usage: backplane trace summary FILE [--json]\n";

// The categories the table reports, in its order; others are left out.
constexpr std::string_view kCategories[] = {"gather",   "host_to_device", "device_to_host", "device_to_device",
                                            "widening", "allocation",     "staging",        "file_read"};

struct Totals {
  std::uint64_t events = 0;
  double microseconds = 0;
  std::uint64_t bytes = 0;
};

double gigabytes_per_second(const Totals& totals) {
  return totals.microseconds > 0 ? static_cast<double>(totals.bytes) / (totals.microseconds * 1e3) : 0.0;
}

std::uint64_t bytes_of(const json& args) {
  if (!args.is_object() || !args.contains("bytes") || !args["bytes"].is_number()) return 0;
  const double bytes = args["bytes"].get<double>();
  return bytes > 0 ? static_cast<std::uint64_t>(bytes) : 0;
}

std::string text_of(const json& args, const char* key) {
  if (!args.is_object() || !args.contains(key) || !args[key].is_string()) return {};
  return args[key].get<std::string>();
}

struct Summary {
  std::map<std::string, std::map<std::string, Totals>> devices;  // device -> category -> totals
  std::map<std::string, Totals> batch_stream;                    // "gather", "transfer", "wait", "step"
  double first_step = std::numeric_limits<double>::infinity();
  double last_step_end = -std::numeric_limits<double>::infinity();
  std::uint64_t dropped = 0;
};

Summary summarise(const json& file) {
  const json& events = file.is_array() ? file : file.at("traceEvents");
  if (!events.is_array()) throw Error(ErrorCode::kInvalidFile, "'traceEvents' is not an array");
  Summary summary;
  for (const json& event : events) {
    if (!event.is_object() || event.value("ph", "") != "X") continue;
    const std::string category = event.value("cat", "");
    const double begin = event.value("ts", 0.0);
    const double duration = event.value("dur", 0.0);
    const json args = event.value("args", json::object());
    if (category == "batch_stream") {
      const std::string name = event.value("name", "");
      Totals& totals = summary.batch_stream[name];
      ++totals.events;
      totals.microseconds += duration;
      totals.bytes += bytes_of(args);
      if (name == "step") {
        summary.first_step = std::min(summary.first_step, begin);
        summary.last_step_end = std::max(summary.last_step_end, begin + duration);
      }
      continue;
    }
    if (std::find(std::begin(kCategories), std::end(kCategories), category) == std::end(kCategories)) continue;
    std::string device = text_of(args, "device");
    if (device.empty()) device = text_of(args, "target");
    if (device.empty()) device = "host";
    Totals& totals = summary.devices[device][category];
    ++totals.events;
    totals.microseconds += duration;
    totals.bytes += bytes_of(args);
  }
  if (file.is_object() && file.contains("otherData") && file["otherData"].is_object()) {
    summary.dropped = file["otherData"].value("dropped_events", std::uint64_t{0});
  }
  return summary;
}

// wait time / the span from the first step's begin to the last step's end.
std::optional<double> data_stall_fraction(const Summary& summary) {
  const auto wait = summary.batch_stream.find("wait");
  if (wait == summary.batch_stream.end() || !(summary.last_step_end > summary.first_step)) return std::nullopt;
  return wait->second.microseconds / (summary.last_step_end - summary.first_step);
}

json totals_json(const Totals& totals) {
  return {{"events", totals.events},
          {"time_us", totals.microseconds},
          {"bytes", totals.bytes},
          {"gbps", gigabytes_per_second(totals)}};
}

json summary_json(const Summary& summary) {
  json devices = json::object();
  for (const auto& [device, categories] : summary.devices) {
    json per = json::object();
    for (std::string_view category : kCategories) {
      if (auto found = categories.find(std::string(category)); found != categories.end()) {
        per[std::string(category)] = totals_json(found->second);
      }
    }
    devices[device] = per;
  }
  json out = {{"devices", devices}, {"dropped_events", summary.dropped}};
  if (summary.batch_stream.empty()) {
    out["batch_stream"] = nullptr;
  } else {
    json stream = json::object();
    for (const auto& [name, totals] : summary.batch_stream) stream[name] = totals_json(totals);
    const auto fraction = data_stall_fraction(summary);
    stream["data_stall_fraction"] = fraction ? json(*fraction) : json(nullptr);
    out["batch_stream"] = stream;
  }
  return out;
}

void print_text(const Summary& summary) {
  fmt::print("{:<12} {:<18} {:>8} {:>12} {:>12} {:>8}\n", "device", "category", "events", "time (ms)", "bytes", "GB/s");
  for (const auto& [device, categories] : summary.devices) {
    for (std::string_view category : kCategories) {
      const auto found = categories.find(std::string(category));
      if (found == categories.end()) continue;
      const Totals& totals = found->second;
      fmt::print("{:<12} {:<18} {:>8} {:>12.3f} {:>12} {:>8.2f}\n", device, category, totals.events,
                 totals.microseconds / 1e3, format_bytes(totals.bytes), gigabytes_per_second(totals));
    }
  }
  if (summary.devices.empty()) fmt::print("(no transfer, gather or allocation events)\n");
  if (!summary.batch_stream.empty()) {
    fmt::print("\nbatch stream:\n");
    for (const auto& [name, totals] : summary.batch_stream) {
      fmt::print("  {:<10} {:>8} events {:>12.3f} ms {:>12}\n", name, totals.events, totals.microseconds / 1e3,
                 format_bytes(totals.bytes));
    }
    if (const auto fraction = data_stall_fraction(summary)) {
      fmt::print("  data_stall_fraction {:.4f} (wait time / first step to last step)\n", *fraction);
    }
  }
  if (summary.dropped != 0) {
    fmt::print("\nwarning: the recorder dropped the {} oldest events (its capacity was reached)\n", summary.dropped);
  }
}

}  // namespace

int run_trace(const Arguments& args) {
  if (args.empty() || args[0] != "summary") {
    fmt::print(stderr, "{}", kUsage);
    return 2;
  }
  std::optional<std::string> file;
  bool as_json = false;
  for (std::size_t index = 1; index < args.size(); ++index) {
    if (args[index] == "--json") {
      as_json = true;
    } else if (!file && !args[index].starts_with("-")) {
      file = std::string(args[index]);
    } else {
      fmt::print(stderr, "backplane trace: unexpected argument '{}'\n{}", args[index], kUsage);
      return 2;
    }
  }
  if (!file) {
    fmt::print(stderr, "{}", kUsage);
    return 2;
  }
  std::ifstream in(*file);
  if (!in) {
    fmt::print(stderr, "backplane trace: cannot open {}\n", *file);
    return 1;
  }
  Summary summary;
  try {
    summary = summarise(json::parse(in));
  } catch (const std::exception& error) {
    fmt::print(stderr, "backplane trace: {} is not a readable trace: {}\n", *file, error.what());
    return 1;
  }
  if (as_json) {
    fmt::print("{}\n", summary_json(summary).dump(2));
  } else {
    print_text(summary);
  }
  return 0;
}

}  // namespace backplane::tools
