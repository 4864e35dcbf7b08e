// The discovery entry of one backend, failing the test (naming the backend)
// when the runtime has none of that name.
#pragma once

#include <backplane/backplane.hpp>

#include <doctest/doctest.h>

#include <string_view>

namespace backplane::testing {

inline const BackendInfo& backend_named(const Runtime& runtime, std::string_view name) {
  const BackendInfo* info = runtime.find_backend(name);
  REQUIRE_MESSAGE(info != nullptr, "no backend named " << name);
  return *info;
}

}  // namespace backplane::testing
