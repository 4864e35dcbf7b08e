#include "util/log.hpp"

#include "util/environment.hpp"
#include "util/fork.hpp"

#include <cstdio>
#include <mutex>
#include <optional>
#include <string>

namespace backplane::detail {
namespace {

std::optional<LogLevel> parse_level(std::string_view text) {
  if (text == "error") return LogLevel::kError;
  if (text == "warn") return LogLevel::kWarn;
  if (text == "info") return LogLevel::kInfo;
  if (text == "debug") return LogLevel::kDebug;
  return std::nullopt;
}

constexpr std::string_view kLevelNames[] = {"error", "warn", "info", "debug"};

}  // namespace

LogLevel log_level() {
  static const LogLevel level = [] {
    auto value = Environment::process().get("BACKPLANE_LOG");
    if (!value || value->empty()) return LogLevel::kWarn;
    if (auto parsed = parse_level(*value)) return *parsed;
    std::fprintf(stderr,
                 "backplane: warn: BACKPLANE_LOG='%s' is not one of error, warn, info, debug; "
                 "using warn\n",
                 value->c_str());
    return LogLevel::kWarn;
  }();
  return level;
}

void log_write(LogLevel level, std::string_view message) {
  // Fork-safe: a transfer thread logging at fork time must not leave it
  // locked in the child. Leaked so that logging works during static destruction.
  static auto* mutex = new ForkSafeMutex;
  std::lock_guard lock(*mutex);
  std::fprintf(stderr, "backplane: %s: %.*s\n", kLevelNames[static_cast<int>(level)].data(),
               static_cast<int>(message.size()), message.data());
}

}  // namespace backplane::detail
