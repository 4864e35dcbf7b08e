// caught_error: the one translation of an exception into a code and message,
// used by the C API's guard, the transfer threads, discovery and the kit.
#include "util/caught_error.hpp"

#include <doctest/doctest.h>

#include <new>
#include <stdexcept>

namespace {

using backplane::ErrorCode;
using backplane::detail::caught_error;
using backplane::detail::CaughtError;

template <class Throw>
CaughtError catch_from(Throw&& thrower) {
  try {
    thrower();
  } catch (...) {
    return caught_error();
  }
  FAIL("nothing was thrown");
  return {};
}

}  // namespace

TEST_CASE("caught_error: an Error keeps its code and message") {
  const CaughtError caught =
      catch_from([] { throw backplane::Error(ErrorCode::kOutOfRange, "sim:3: no such device (2 device(s))"); });
  CHECK(caught.code == ErrorCode::kOutOfRange);
  CHECK(caught.message == "sim:3: no such device (2 device(s))");
}

TEST_CASE("caught_error: bad_alloc is out of host memory") {
  const CaughtError caught = catch_from([] { throw std::bad_alloc(); });
  CHECK(caught.code == ErrorCode::kOutOfMemory);
  CHECK(caught.message == "out of host memory");
}

TEST_CASE("caught_error: any other std::exception is an internal error naming what it said") {
  const CaughtError caught = catch_from([] { throw std::logic_error("vector::_M_range_check"); });
  CHECK(caught.code == ErrorCode::kInternal);
  CHECK(caught.message == "internal error: vector::_M_range_check");
}

TEST_CASE("caught_error: an exception of no known type is an internal error saying so") {
  const CaughtError caught = catch_from([] { throw 42; });
  CHECK(caught.code == ErrorCode::kInternal);
  CHECK(caught.message == "internal error: unknown exception");
}
