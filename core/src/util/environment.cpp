#include "util/environment.hpp"

#include <stdlib.h>
#include <sys/auxv.h>

namespace backplane::detail {

Environment Environment::process() {
  Environment environment;
  // AT_SECURE is what secure_getenv consults: setuid, setgid or capabilities.
  environment.elevated_ = getauxval(AT_SECURE) != 0;
  return environment;
}

Environment Environment::fixed(std::map<std::string, std::string> variables) {
  Environment environment;
  environment.fixed_.emplace(variables.begin(), variables.end());
  return environment;
}

std::optional<std::string> Environment::get(std::string_view name) const {
  if (fixed_) {
    auto found = fixed_->find(name);
    if (found == fixed_->end()) return std::nullopt;
    return found->second;
  }
  const char* value = secure_getenv(std::string(name).c_str());
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

}  // namespace backplane::detail
