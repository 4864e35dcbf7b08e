// Default-device scopes exited out of order: the scope being exited is
// removed alone, the inner one keeps deciding, and the misuse is reported
// with both scopes named.
#include "selection_fixture.hpp"

#include <backplane/backplane.hpp>

#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

using namespace backplane;
using namespace backplane::testing;

namespace {

// What the library writes to stderr while `body` runs.
template <class Body>
std::string stderr_of(Body&& body) {
  std::fflush(stderr);
  std::FILE* capture = std::tmpfile();
  REQUIRE(capture != nullptr);
  const int saved = ::dup(STDERR_FILENO);
  ::dup2(::fileno(capture), STDERR_FILENO);
  body();
  std::fflush(stderr);
  ::dup2(saved, STDERR_FILENO);
  ::close(saved);
  std::rewind(capture);
  std::string text;
  char buffer[512];
  while (std::fgets(buffer, sizeof(buffer), capture) != nullptr) text += buffer;
  std::fclose(capture);
  return text;
}

}  // namespace

TEST_CASE("[scopes] every scope gets its own token, growing with each entry") {
  Runtime runtime(test_options());
  DefaultDeviceScope outer(runtime, "cpu:1");
  DefaultDeviceScope inner(runtime, "cpu:2");
  CHECK(outer.token() != 0);
  CHECK(inner.token() > outer.token());
  DefaultDeviceScope nothing(runtime, std::optional<Device>());
  CHECK(nothing.token() == 0);
}

TEST_CASE("[scopes] a scope exited before an inner one removes only itself and says which scopes") {
  Runtime runtime(test_options());
  std::optional<DefaultDeviceScope> outer(std::in_place, runtime, "cpu:1");
  std::optional<DefaultDeviceScope> inner(std::in_place, runtime, "cpu:2");
  const auto outer_token = outer->token();
  const auto inner_token = inner->token();

  const std::string logged = stderr_of([&] { outer.reset(); });
  CHECK(contains(logged, "default-device scope cpu:1 (token " + std::to_string(outer_token) +
                             ") exited while scope cpu:2 (token " + std::to_string(inner_token) +
                             "), entered later, is still open; exit scopes innermost first"));
  // The inner scope still decides: code inside it stays on the device it chose.
  CHECK(runtime.default_device().device.selector() == "cpu:2");

  const std::string quiet = stderr_of([&] { inner.reset(); });
  CHECK(quiet.empty());
  CHECK(runtime.default_device().source == DeviceSource::kAutomatic);
}

TEST_CASE("[scopes] scopes of another runtime may exit in any order") {
  Runtime first(test_options());
  Runtime second(test_options());
  std::optional<DefaultDeviceScope> outer(std::in_place, first, "cpu:1");
  std::optional<DefaultDeviceScope> other(std::in_place, second, "cpu:3");
  const std::string logged = stderr_of([&] { outer.reset(); });
  CHECK(logged.empty());
  CHECK(first.default_device().source == DeviceSource::kAutomatic);
  CHECK(second.default_device().device.selector() == "cpu:3");
}
