// Runtime internals, shared by the registry, selection and placement code.
#pragma once

#include "registry/discovery.hpp"
#include "util/environment.hpp"

#include <backplane/backplane.hpp>

#include <mutex>
#include <vector>

namespace backplane {

struct Runtime::Impl {
  Impl(Options options, Environment environment)
      : options(std::move(options)), environment(std::move(environment)) {}

  // Runs discovery once; later calls return at once. Thread-safe.
  void ensure_discovered();
  // The live backend of an available plugin; throws naming its status otherwise.
  Backend& live_backend(std::string_view name);

  Options options;
  Environment environment;
  std::vector<SearchPathEntry> search_path;
  std::vector<DiscoveredBackend> discovered;
  std::vector<BackendInfo> infos;  // discovered[i].info, kept for the API

 private:
  std::once_flag discovered_once_;
};

}  // namespace backplane
