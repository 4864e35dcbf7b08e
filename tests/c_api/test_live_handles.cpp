// The C API's handle registries: made only by make_live_handles, never
// destroyed (so nothing live at exit calls into a plugin whose statics are
// gone), and a destroyed handle is refused by address.
#include "c_api/c_api_support.hpp"

#include <doctest/doctest.h>

#include <memory>
#include <type_traits>

namespace {

struct Thing {
  int value = 0;
};

}  // namespace

using backplane::c_api::LiveHandles;
using backplane::c_api::make_live_handles;

// A registry as a static object would be destroyed at exit: it does not compile.
static_assert(!std::is_destructible_v<LiveHandles<Thing>>, "registries are never destroyed");
static_assert(!std::is_default_constructible_v<LiveHandles<Thing>>, "registries come from make_live_handles");
static_assert(!std::is_copy_constructible_v<LiveHandles<Thing>>);

TEST_CASE("[c_api] a registry from make_live_handles hands out, keeps and forgets handles by address") {
  // Kept reachable, as the C API's registries are (never destroyed, never leaked).
  static LiveHandles<Thing>& registry = make_live_handles<Thing>();
  static LiveHandles<Thing>& another = make_live_handles<Thing>();
  CHECK(&registry != &another);  // each call makes one; each file keeps its own
  auto owned = std::make_shared<Thing>();
  owned->value = 7;
  Thing* handle = registry.add(owned);
  owned.reset();
  const std::shared_ptr<Thing> held = registry.acquire(handle);
  REQUIRE(held != nullptr);
  CHECK(held->value == 7);
  CHECK(registry.remove(handle) != nullptr);
  CHECK(registry.acquire(handle) == nullptr);  // destroyed: refused, never read
  CHECK(registry.remove(handle) == nullptr);   // twice: nothing
  CHECK(held->value == 7);                     // a call in flight keeps the object
  CHECK(registry.acquire(nullptr) == nullptr);
}
