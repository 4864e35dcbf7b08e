// Checking errors in doctest cases: capture the backplane::Error a call
// throws, and look for the words a user would read in its message.
#pragma once

#include <backplane/error.hpp>

#include <doctest/doctest.h>

#include <string_view>

namespace backplane::testing {

inline bool contains(std::string_view text, std::string_view part) { return text.find(part) != std::string_view::npos; }

// Runs `call`, which must throw backplane::Error; returns it.
template <class Call>
Error error_from(Call&& call) {
  try {
    call();
  } catch (const Error& error) {
    return error;
  }
  FAIL("expected backplane::Error");
  return Error(ErrorCode::kInternal, "unreachable");
}

}  // namespace backplane::testing
