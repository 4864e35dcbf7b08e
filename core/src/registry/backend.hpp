// One live, configured instance of a plugin's backend, wrapped for C++.
//
// Discovery-time calls (create, probe) return values; device calls throw
// backplane::Error carrying the plugin's message.
#pragma once

#include "loader/plugin_library.hpp"

#include <backplane/backplane.hpp>
#include <backplane/plugin.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace backplane {

struct PluginFailure {
  ErrorCode code;
  std::string message;
};

// Copies the error's code and message, then destroys it. NULL -> nullopt.
std::optional<PluginFailure> consume_error(BP_Error* error);

// Throws Error(code, "<context>: <plugin message>") when `error` is set.
void throw_if_error(BP_Error* error, std::string_view context);

using PluginOptions = std::vector<std::pair<std::string, std::string>>;

class Backend {
 public:
  struct Created;
  struct ProbeAnswer {
    bool available = false;
    std::string reason;
  };

  // Calls backend_create with the plugin options.
  static Created create(std::shared_ptr<PluginLibrary> library, const PluginOptions& options);
  ~Backend();
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;

  // Either the plugin's answer or the error it returned.
  std::pair<std::optional<ProbeAnswer>, std::optional<PluginFailure>> probe();

  int device_count();
  DeviceInfo device_info(int ordinal);

  std::string_view name() const { return library_->name(); }
  const BP_PluginApi& api() const { return library_->api(); }
  BP_Backend* handle() const { return handle_; }
  // Called before the first device use: the plugin then stays loaded until exit.
  void mark_used() { library_->keep_loaded(); }

 private:
  Backend(std::shared_ptr<PluginLibrary> library, BP_Backend* handle)
      : library_(std::move(library)), handle_(handle) {}

  std::shared_ptr<PluginLibrary> library_;
  BP_Backend* handle_;
};

struct Backend::Created {
  std::unique_ptr<Backend> backend;
  std::optional<PluginFailure> failure;
};

}  // namespace backplane
