// The one table of error codes: each ErrorCode with the C API status and the
// plugin ABI code that carry it across their boundaries. Every pair is
// checked at compile time here; tests/python checks the Python classes
// against backplane.h.
#ifndef BACKPLANE_CORE_UTIL_ERROR_CODES_HPP
#define BACKPLANE_CORE_UTIL_ERROR_CODES_HPP

#include <backplane/backplane.h>
#include <backplane/plugin.h>
#include <backplane/error.hpp>

#include <cstddef>
#include <cstdint>

namespace backplane::detail {

struct ErrorCodeRow {
  ErrorCode code;
  bp_status c_status;
  BP_ErrorCode plugin_code;  // 0: no plugin reports this (the core's own codes)
};

inline constexpr ErrorCodeRow kErrorCodes[] = {
    {ErrorCode::kOk, BP_OK, 0},
    {ErrorCode::kInvalidArgument, BP_STATUS_INVALID_ARGUMENT, BP_ERROR_INVALID_ARGUMENT},
    {ErrorCode::kOutOfMemory, BP_STATUS_OUT_OF_MEMORY, BP_ERROR_OUT_OF_MEMORY},
    {ErrorCode::kUnavailable, BP_STATUS_UNAVAILABLE, BP_ERROR_UNAVAILABLE},
    {ErrorCode::kUnsupported, BP_STATUS_UNSUPPORTED, BP_ERROR_UNSUPPORTED},
    {ErrorCode::kDevice, BP_STATUS_DEVICE, BP_ERROR_DEVICE},
    {ErrorCode::kInternal, BP_STATUS_INTERNAL, BP_ERROR_INTERNAL},
    {ErrorCode::kOutOfRange, BP_STATUS_OUT_OF_RANGE, BP_ERROR_OUT_OF_RANGE},
    {ErrorCode::kNotFound, BP_STATUS_NOT_FOUND, 0},
    {ErrorCode::kConfig, BP_STATUS_CONFIG, 0},
    {ErrorCode::kInvalidFile, BP_STATUS_INVALID_FILE, 0},
    {ErrorCode::kPlugin, BP_STATUS_PLUGIN, 0},
    {ErrorCode::kIo, BP_STATUS_IO, 0},
    {ErrorCode::kCancelled, BP_STATUS_CANCELLED, 0},
};

// Row i holds ErrorCode i, and both boundaries use the same number, so
// converting is a cast; these checks are what makes the cast safe.
constexpr bool error_codes_agree() {
  for (std::size_t i = 0; i < std::size(kErrorCodes); ++i) {
    const ErrorCodeRow& row = kErrorCodes[i];
    if (static_cast<std::size_t>(row.code) != i || row.c_status != static_cast<bp_status>(row.code)) return false;
    if (row.plugin_code != 0 && row.plugin_code != static_cast<BP_ErrorCode>(row.code)) return false;
  }
  return true;
}
static_assert(error_codes_agree(), "ErrorCode, bp_status and BP_ErrorCode must number each code alike");
static_assert(kErrorCodes[std::size(kErrorCodes) - 1].c_status == BP_STATUS_CANCELLED,
              "a new bp_status needs a row here");
inline constexpr BP_ErrorCode kLastPluginCode = BP_ERROR_OUT_OF_RANGE;

// Each plugin code 1..kLastPluginCode has exactly one row, so from_plugin_code
// below never casts to a code the table does not pair; tests/python checks
// kLastPluginCode against the BP_ERROR_* that plugin.h defines.
constexpr bool plugin_codes_covered() {
  for (BP_ErrorCode code = 1; code <= kLastPluginCode; ++code) {
    std::size_t rows = 0;
    for (const ErrorCodeRow& row : kErrorCodes) rows += row.plugin_code == code ? 1 : 0;
    if (rows != 1) return false;
  }
  for (const ErrorCodeRow& row : kErrorCodes) {
    if (row.plugin_code > kLastPluginCode) return false;
  }
  return true;
}
static_assert(plugin_codes_covered(), "every BP_ErrorCode needs its one row, and kLastPluginCode the newest");

// A plugin's code as the core's; a code the ABI does not define is the
// plugin breaking the contract.
constexpr ErrorCode from_plugin_code(BP_ErrorCode code) {
  return code >= 1 && code <= kLastPluginCode ? static_cast<ErrorCode>(code) : ErrorCode::kPlugin;
}

constexpr bool is_status(bp_status status) {
  return status >= 0 && static_cast<std::size_t>(status) < std::size(kErrorCodes);
}

}  // namespace backplane::detail

#endif  // BACKPLANE_CORE_UTIL_ERROR_CODES_HPP
