// Runtime internals, shared by the registry, selection and placement code.
#pragma once

#include "config/config.hpp"
#include "registry/discovery.hpp"
#include "util/environment.hpp"

#include <backplane/backplane.hpp>

#include <memory>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace backplane {

struct PlacementState;

struct Runtime::Impl {
  Impl(Options options, Environment environment)
      : options(std::move(options)), environment(std::move(environment)) {}

  // Reads the config and runs discovery once; later calls return at once.
  // Throws Error when the config file is unusable (and again on each call).
  void ensure_discovered();
  // The live backend of an available plugin; throws naming its status otherwise.
  Backend& live_backend(std::string_view name);
  // The winning entry for `name` (not shadowed), or nullptr.
  const DiscoveredBackend* find(std::string_view name) const;
  // Backends in the order the automatic choice considers them: the order of
  // BACKPLANE_BACKENDS / `backends` when given, else by priority (highest
  // first, ties in search order). Shadowed entries are left out.
  std::vector<const DiscoveredBackend*> preference_order() const;
  // "cpu (available), cuda (unavailable: no NVIDIA driver)".
  std::string describe_backends() const;

  // Unique for the life of the process (thread-local scopes are keyed by it).
  const std::uint64_t id = next_id();
  Options options;
  Environment environment;

  // Set once by ensure_discovered.
  Config config;
  std::vector<SearchPathEntry> search_path;
  std::vector<DiscoveredBackend> discovered;
  std::vector<BackendInfo> infos;  // discovered[i].info, kept for the API
  // BACKPLANE_BACKENDS or config `backends`: the set and its order.
  std::optional<std::vector<std::string>> backend_order;
  std::string backend_order_source;

  std::mutex process_default_mutex;
  std::optional<Device> process_default;

  // The placement layer's state (device allocators, transfer threads), made
  // on first use by placement_of() in placement/context.cpp. Declared after
  // `discovered` so it is destroyed first: its transfer threads finish while
  // the backends still exist.
  std::shared_ptr<PlacementState> placement;
  std::once_flag placement_once;

 private:
  static std::uint64_t next_id() {
    static std::atomic<std::uint64_t> counter{0};
    return ++counter;
  }
  std::once_flag discovered_once_;
};

}  // namespace backplane
