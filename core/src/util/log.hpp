// Diagnostics on stderr, filtered by BACKPLANE_LOG (error, warn, info, debug).
#pragma once

#include <fmt/format.h>

#include <string_view>

namespace backplane::detail {

enum class LogLevel { kError = 0, kWarn = 1, kInfo = 2, kDebug = 3 };

// The level chosen by BACKPLANE_LOG, read once (default: warn). An unknown
// value is reported once as a warning and leaves the default.
LogLevel log_level();
void log_write(LogLevel level, std::string_view message);

template <class... Args>
void log(LogLevel level, fmt::format_string<Args...> format, Args&&... args) {
  if (level <= log_level()) log_write(level, fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace backplane::detail
