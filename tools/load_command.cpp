// `backplane load FILE [--device SEL] [--names a,b,...]`: loads a safetensors
// file onto a device the way a program would (safetensors::load) and reports
// the tensors, bytes, seconds and GB/s. Progress goes to stderr: a bar
// redrawn in place on a terminal, a line per tenth otherwise (logs, CI).
// Exit status: 0 loaded, 1 invalid/unreadable file or device error, 2 usage.
#include "arguments.hpp"
#include "commands.hpp"

#include <backplane/safetensors.hpp>

#include <fmt/format.h>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

namespace backplane::tools {
namespace {

namespace st = backplane::safetensors;
using Clock = std::chrono::steady_clock;

constexpr std::string_view kUsage =
    "usage: backplane load FILE [--device SEL] [--names NAME,NAME...]\n"
    "  --device SEL   cpu, cpu:0, cuda:1, ... (default: the default device)\n"
    "  --names LIST   load only these tensors (comma-separated)\n";

std::vector<std::string> split_names(std::string_view list) {
  std::vector<std::string> names;
  while (!list.empty()) {
    const std::size_t comma = list.find(',');
    names.emplace_back(list.substr(0, comma));
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return names;
}

double gigabytes_per_second(std::uint64_t bytes, double seconds) {
  return seconds > 0 ? static_cast<double>(bytes) / seconds / 1e9 : 0.0;
}

// Reports progress on stderr. Called on the loading thread.
class ProgressPrinter {
 public:
  explicit ProgressPrinter(bool terminal) : terminal_(terminal), start_(Clock::now()) {}

  void operator()(std::uint64_t done, std::uint64_t total) {
    const double fraction = total == 0 ? 1.0 : static_cast<double>(done) / static_cast<double>(total);
    if (terminal_) {
      const auto now = Clock::now();
      // Redraw at most ten times a second, and always at the end.
      if (done != total && now - last_draw_ < std::chrono::milliseconds(100)) return;
      last_draw_ = now;
      constexpr int kWidth = 30;
      const int filled = static_cast<int>(fraction * kWidth);
      const double seconds = std::chrono::duration<double>(now - start_).count();
      fmt::print(stderr, "\r[{:#<{}}{:.<{}}] {:3.0f}%  {} / {}  {:.2f} GB/s", "", filled, "", kWidth - filled,
                 fraction * 100, format_bytes(done), format_bytes(total), gigabytes_per_second(done, seconds));
      if (done == total) fmt::print(stderr, "\n");
      drawn_ = true;
      return;
    }
    const int tenth = static_cast<int>(fraction * 10);
    if (tenth <= last_tenth_) return;
    last_tenth_ = tenth;
    fmt::print(stderr, "progress: {:3d}% ({} of {})\n", static_cast<int>(fraction * 100), format_bytes(done),
               format_bytes(total));
  }

  // Ends a partly drawn bar so that an error message starts on its own line.
  void finish() const {
    if (terminal_ && drawn_) fmt::print(stderr, "\n");
  }

 private:
  bool terminal_;
  Clock::time_point start_;
  Clock::time_point last_draw_{};
  int last_tenth_ = -1;
  bool drawn_ = false;
};

}  // namespace

int run_load(const Arguments& args) {
  const ParsedArguments parsed = parse_arguments(args, {{"--device", true}, {"--names", true}});
  if (parsed.help) {
    fmt::print("{}", kUsage);
    return 0;
  }
  if (!parsed.error.empty() || parsed.positional.size() > 1) {
    fmt::print(stderr, "backplane load: {}\n{}", parsed.error.empty() ? "one file at a time" : parsed.error, kUsage);
    return 2;
  }
  if (parsed.positional.empty()) {
    fmt::print(stderr, "{}", kUsage);
    return 2;
  }
  const std::string file(parsed.positional.front());
  std::optional<std::string> selector;
  st::LoadOptions options;
  for (const auto& [name, value] : parsed.options) {
    if (name == "--device") {
      selector = std::string(value);
    } else {
      options.names = split_names(value);
    }
  }

  Runtime& runtime = Runtime::process_default();
  const Device device = selector ? runtime.resolve(*selector) : runtime.default_device().device;
  ProgressPrinter printer(::isatty(STDERR_FILENO) != 0);
  options.progress = [&printer](std::uint64_t done, std::uint64_t total) { printer(done, total); };

  const auto start = Clock::now();
  st::Loaded loaded;
  try {
    loaded = st::load(runtime, file, device, options);
  } catch (...) {
    printer.finish();
    throw;  // main prints "backplane load: error: FILE: ... RULE ..."
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();

  std::uint64_t bytes = 0;
  for (const auto& [name, array] : loaded.tensors) bytes += array.nbytes();
  const bool mapped = !loaded.tensors.empty() && loaded.tensors.begin()->second.host_data() != nullptr;
  fmt::print("loaded {} tensor{} ({}, {} bytes) from {} onto {} in {:.3f} s: {:.2f} GB/s{}\n", loaded.tensors.size(),
             loaded.tensors.size() == 1 ? "" : "s", format_bytes(bytes), bytes, file, device.selector(), seconds,
             gigabytes_per_second(bytes, seconds),
             mapped ? " (zero-copy: the file is mapped, its pages are read when first used)" : "");
  return 0;
}

}  // namespace backplane::tools
