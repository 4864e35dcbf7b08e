// What a Runtime is made of: its registry and its placement state, side by
// side. Placement's state is made on first use (placement/placement.cpp) and
// torn down first, explicitly: its transfer threads finish while the
// registry's backends still exist. Placement shares the registry: a
// device_put without a Runtime that got hold of the placement just before
// the Runtime was destroyed still finds its devices.
#pragma once

#include "registry/registry.hpp"

#include <backplane/backplane.hpp>

#include <memory>
#include <mutex>

namespace backplane {
namespace detail {
class Placement;
}  // namespace detail

struct Runtime::Impl {
  Impl(Options options, detail::Environment environment)
      : registry(std::make_shared<detail::Registry>(std::move(options), std::move(environment))) {}
  ~Impl() { placement.reset(); }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  const std::shared_ptr<detail::Registry> registry;
  std::shared_ptr<detail::Placement> placement;  // set once, under placement_once
  std::once_flag placement_once;
};

namespace detail {

// The internal layers' way into a Runtime (it has no public accessor).
struct RuntimeAccess {
  static Runtime::Impl& impl(const Runtime& runtime) { return *runtime.impl_; }
  static Registry& registry(const Runtime& runtime) { return *runtime.impl_->registry; }
};

}  // namespace detail
}  // namespace backplane
