// The C++ API's error type.
//
// Error model: operations that can fail for reasons outside the caller's
// control (allocation, copies, parsing files, resolving selectors) throw
// backplane::Error; discovery and availability are values (BackendStatus),
// never exceptions.
#ifndef BACKPLANE_ERROR_HPP
#define BACKPLANE_ERROR_HPP

#include <backplane/api.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace backplane {

// Stable, explicitly numbered; shared with the C API's status codes.
enum class ErrorCode : std::int32_t {
  kOk = 0,
  kInvalidArgument = 1,  // a malformed selector, option or argument
  kOutOfMemory = 2,      // device or host allocation failed
  kUnavailable = 3,      // the backend or device named cannot be used
  kUnsupported = 4,      // an optional feature is not offered
  kDevice = 5,           // the driver or device reported a failure
  kInternal = 6,         // a bug or broken invariant
  kOutOfRange = 7,       // ordinal, offset or size out of range
  kNotFound = 8,         // a file, backend or tensor that does not exist
  kConfig = 9,           // the configuration file is malformed
  kInvalidFile = 10,     // a data file is malformed
  kPlugin = 11,          // a plugin broke the ABI contract
  kIo = 12,              // the file system refused a read or write
  kCancelled = 13,       // the caller stopped the operation (a progress callback said so)
};

BACKPLANE_API std::string_view to_string(ErrorCode code) noexcept;

class BACKPLANE_API Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ErrorCode code() const noexcept { return code_; }

 private:
  ErrorCode code_;
};

}  // namespace backplane

#endif  // BACKPLANE_ERROR_HPP
