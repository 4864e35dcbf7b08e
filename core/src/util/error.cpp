#include <backplane/error.hpp>

namespace backplane {

std::string_view to_string(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::kOk: return "ok";
    case ErrorCode::kInvalidArgument: return "invalid argument";
    case ErrorCode::kOutOfMemory: return "out of memory";
    case ErrorCode::kUnavailable: return "unavailable";
    case ErrorCode::kUnsupported: return "unsupported";
    case ErrorCode::kDevice: return "device error";
    case ErrorCode::kInternal: return "internal error";
    case ErrorCode::kOutOfRange: return "out of range";
    case ErrorCode::kNotFound: return "not found";
    case ErrorCode::kConfig: return "configuration error";
    case ErrorCode::kInvalidFile: return "invalid file";
    case ErrorCode::kPlugin: return "plugin error";
    case ErrorCode::kIo: return "I/O error";
    case ErrorCode::kCancelled: return "cancelled";
  }
  return "unknown error";
}

}  // namespace backplane
