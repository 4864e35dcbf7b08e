// The registry: what a Runtime found (config, search path, every plugin with
// its status) and the device objects of its available backends.
//
// Runtime::Impl (registry/runtime_impl.hpp) holds a Registry and placement's
// state side by side; neither owns the other's.
#pragma once

#include "config/config.hpp"
#include "registry/device.hpp"
#include "registry/discovery.hpp"
#include "util/environment.hpp"

#include <backplane/backplane.hpp>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace backplane::detail {

struct Registry {
  Registry(Runtime::Options options, Environment environment)
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
  // Every discovered backend's name, whatever its status: what a suggestion
  // for a mistyped name may name.
  std::vector<std::string> backend_names() const;
  // The object of `device`, made on first use: the one place an ordinal is
  // checked. Throws as live_backend, or kOutOfRange (check_ordinal).
  std::shared_ptr<LiveDevice> device(const Device& device);

  // Unique for the life of the process (thread-local scopes are keyed by it).
  const std::uint64_t id = next_id();
  Runtime::Options options;
  Environment environment;

  // Set once by ensure_discovered.
  Config config;
  std::vector<SearchPathEntry> search_path;
  std::vector<DiscoveredBackend> discovered;
  std::vector<BackendInfo> infos;  // discovered[i].info, kept for the API
  // BACKPLANE_BACKENDS or config `backends`: the set and its order.
  std::optional<std::vector<std::string>> backend_order;
  std::string backend_order_source;
  // Backends given options by the user, and where: "[backend.cpu] in
  // /etc/backplane.toml". One of them failing stops the automatic choice.
  std::map<std::string, std::string, std::less<>> configured;

  std::mutex process_default_mutex;
  std::optional<Device> process_default;

 private:
  static std::uint64_t next_id() {
    static std::atomic<std::uint64_t> counter{0};
    return ++counter;
  }
  std::once_flag discovered_once_;
  std::mutex devices_mutex_;
  std::map<std::pair<std::string, int>, std::shared_ptr<LiveDevice>> devices_;
};

}  // namespace backplane::detail
