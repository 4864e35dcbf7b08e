// The one translation of an exception into an error code and message, shared
// by every place the core stops an exception: the C API's guard, the transfer
// threads, the completion of an asynchronous copy, the conformance kit's checks
// and the probe helper.
//
// The plugin SDK's guard (plugin_support.hpp) keeps its own: it is an
// installed header a plugin compiles alone, without the core, and it maps
// onto the ABI's BP_ErrorCode rather than ErrorCode.
#pragma once

#include <backplane/error.hpp>

#include <string>

namespace backplane::detail {

struct CaughtError {
  ErrorCode code = ErrorCode::kInternal;
  std::string message;
};

// The exception being handled: an Error keeps its code and message,
// std::bad_alloc is kOutOfMemory "out of host memory", any other exception is
// kInternal "internal error: <what()>" (or "internal error: unknown
// exception"). With no memory left to copy the message, kOutOfMemory and an
// empty message. Call it only inside a catch block.
CaughtError caught_error() noexcept;

}  // namespace backplane::detail
