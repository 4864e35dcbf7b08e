// `backplane trace summary FILE [--json]`: what a trace file (written by
// trace_start / BACKPLANE_TRACE) says about each device: time and bytes per
// category, the achieved GB/s, and for each batch stream how long training
// waited for data. Exit status: 0 done, 1 unreadable or not a trace, 2 usage.
// docs/tracing.md describes the figures and the JSON shape, which only grows.
#include "commands.hpp"
#include "trace_reader.hpp"
#include "util/regular_file.hpp"

#include <backplane/error.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <istream>
#include <optional>
#include <streambuf>
#include <string>

namespace backplane::tools {
namespace {

using json = nlohmann::ordered_json;

constexpr std::string_view kUsage = "usage: backplane trace summary FILE [--json]\n";

// A descriptor read in large blocks, as an istream's buffer. A read error
// ends the stream; error() then holds its errno.
class DescriptorBuffer final : public std::streambuf {
 public:
  explicit DescriptorBuffer(int fd) : fd_(fd) {}
  ~DescriptorBuffer() override { ::close(fd_); }
  DescriptorBuffer(const DescriptorBuffer&) = delete;
  DescriptorBuffer& operator=(const DescriptorBuffer&) = delete;

  int error() const { return error_; }

 protected:
  int_type underflow() override {
    if (gptr() < egptr()) return traits_type::to_int_type(*gptr());
    for (;;) {
      const ssize_t got = ::read(fd_, block_.data(), block_.size());
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) error_ = errno;
      if (got <= 0) return traits_type::eof();
      setg(block_.data(), block_.data(), block_.data() + got);
      return traits_type::to_int_type(*gptr());
    }
  }

 private:
  int fd_;
  int error_ = 0;
  std::array<char, 1 << 16> block_{};
};

double gigabytes_per_second(const TraceTotals& totals) {
  return totals.microseconds > 0 ? static_cast<double>(totals.bytes) / (totals.microseconds * 1e3) : 0.0;
}

json totals_json(const TraceTotals& totals) {
  return {{"events", totals.events},
          {"time_us", totals.microseconds},
          {"bytes", totals.bytes},
          {"gbps", gigabytes_per_second(totals)}};
}

json stream_json(const StreamTotals& stream) {
  json out = json::object();
  for (const auto& [name, totals] : stream.by_name) out[name] = totals_json(totals);
  const auto fraction = stream.data_stall_fraction();
  out["data_stall_fraction"] = fraction ? json(*fraction) : json(nullptr);
  return out;
}

json summary_json(const TraceSummary& summary) {
  json devices = json::object();
  for (const auto& [device, categories] : summary.devices) {
    json per = json::object();
    for (std::string_view category : kDeviceCategories) {
      if (auto found = categories.find(std::string(category)); found != categories.end()) {
        per[std::string(category)] = totals_json(found->second);
      }
    }
    devices[device] = per;
  }
  json out = {{"devices", devices}, {"dropped_events", summary.dropped}};
  out["batch_stream"] = summary.batch_stream.by_name.empty() ? json(nullptr) : stream_json(summary.batch_stream);
  json streams = json::object();
  for (const auto& [stream, totals] : summary.streams) streams[stream] = stream_json(totals);
  out["streams"] = streams;
  return out;
}

// One row per stream: steps, time waited, the step span and the stall.
void print_stream_rows(const TraceSummary& summary) {
  fmt::print("\nbatch streams:\n  {:<10} {:>8} {:>12} {:>12} {:>12}\n", "stream", "steps", "wait (ms)", "steps (ms)",
             "data stall");
  for (const auto& [stream, totals] : summary.streams) {
    const auto steps = totals.by_name.find(std::string(detail::trace::event::kStep));
    const auto wait = totals.by_name.find(std::string(detail::trace::event::kWait));
    const auto fraction = totals.data_stall_fraction();
    fmt::print("  {:<10} {:>8} {:>12.3f} {:>12.3f} {:>12}\n", printable(stream),
               steps == totals.by_name.end() ? 0 : steps->second.events,
               wait == totals.by_name.end() ? 0.0 : wait->second.microseconds / 1e3,
               totals.last_step_end > totals.first_step ? (totals.last_step_end - totals.first_step) / 1e3 : 0.0,
               fraction ? fmt::format("{:.4f}", *fraction) : std::string("-"));
  }
}

void print_text(const TraceSummary& summary) {
  fmt::print("{:<12} {:<18} {:>8} {:>12} {:>12} {:>8}\n", "device", "category", "events", "time (ms)", "bytes", "GB/s");
  for (const auto& [device, categories] : summary.devices) {
    for (std::string_view category : kDeviceCategories) {
      const auto found = categories.find(std::string(category));
      if (found == categories.end()) continue;
      const TraceTotals& totals = found->second;
      fmt::print("{:<12} {:<18} {:>8} {:>12.3f} {:>12} {:>8.2f}\n", printable(device), category, totals.events,
                 totals.microseconds / 1e3, format_bytes(totals.bytes), gigabytes_per_second(totals));
    }
  }
  if (summary.devices.empty()) fmt::print("(no transfer, gather or allocation events)\n");
  if (!summary.batch_stream.by_name.empty()) {
    fmt::print("\nbatch stream:\n");
    for (const auto& [name, totals] : summary.batch_stream.by_name) {
      fmt::print("  {:<10} {:>8} events {:>12.3f} ms {:>12}\n", printable(name), totals.events,
                 totals.microseconds / 1e3, format_bytes(totals.bytes));
    }
    if (const auto fraction = summary.batch_stream.data_stall_fraction()) {
      fmt::print("  data_stall_fraction {:.4f} (wait time / first step to last step)\n", *fraction);
    }
  }
  if (!summary.streams.empty()) print_stream_rows(summary);
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
      fmt::print(stderr, "backplane trace: unexpected argument '{}'\n{}", printable(args[index]), kUsage);
      return 2;
    }
  }
  if (!file) {
    fmt::print(stderr, "{}", kUsage);
    return 2;
  }
  // As the loaders open files: a FIFO or device is refused, not waited on,
  // and a file that cannot be opened says why.
  std::optional<DescriptorBuffer> buffer;
  try {
    struct stat status {};
    buffer.emplace(detail::open_regular_file(*file, status));
  } catch (const Error& error) {
    fmt::print(stderr, "backplane trace: {}\n", printable(error.what()));
    return 1;
  }
  TraceSummary summary;
  try {
    std::istream in(&*buffer);
    summary = read_trace_summary(in);
  } catch (const Error& error) {
    if (buffer->error() != 0) {
      fmt::print(stderr, "backplane trace: cannot read {}: {}\n", printable(*file), std::strerror(buffer->error()));
    } else {
      fmt::print(stderr, "backplane trace: {} is not a readable trace: {}\n", printable(*file),
                 printable(error.what()));
    }
    return 1;
  }
  if (as_json) {
    fmt::print("{}\n", summary_json(summary).dump(2, ' ', false, json::error_handler_t::replace));
  } else {
    print_text(summary);
  }
  return 0;
}

}  // namespace backplane::tools
