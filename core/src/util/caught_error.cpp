#include "util/caught_error.hpp"

#include <exception>
#include <new>

namespace backplane::detail {

CaughtError caught_error() noexcept {
  try {
    try {
      throw;
    } catch (const Error& error) {
      return {error.code(), error.what()};
    } catch (const std::bad_alloc&) {
      return {ErrorCode::kOutOfMemory, "out of host memory"};
    } catch (const std::exception& error) {
      return {ErrorCode::kInternal, std::string("internal error: ") + error.what()};
    } catch (...) {
      return {ErrorCode::kInternal, "internal error: unknown exception"};
    }
  } catch (const std::bad_alloc&) {  // copying the message: the code still says what happened
    return {ErrorCode::kOutOfMemory, std::string()};
  }
}

}  // namespace backplane::detail
