// Where the core reads environment variables from.
//
// The process environment is read through secure_getenv, so override variables
// are ignored in setuid/setgid or otherwise elevated processes (as the Vulkan
// and OpenCL loaders do). Tests and embedders can supply a fixed map instead.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace backplane::detail {

class Environment {
 public:
  // The real process environment.
  static Environment process();
  // A fixed set of variables; nothing is read from the process.
  static Environment fixed(std::map<std::string, std::string> variables);

  std::optional<std::string> get(std::string_view name) const;
  // True when the process is elevated, so that secure_getenv hides overrides.
  bool elevated() const { return elevated_; }

 private:
  Environment() = default;
  std::optional<std::map<std::string, std::string, std::less<>>> fixed_;
  bool elevated_ = false;
};

}  // namespace backplane::detail
