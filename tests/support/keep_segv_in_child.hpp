// Children that must crash with SIGSEGV (a probe of a crashing plugin):
// a sanitizer's SIGSEGV handler would turn the crash into an exit or an
// abort, so for the object's life the sanitizers' options that children
// inherit say handle_segv=0.
#pragma once

#include <cstdlib>
#include <optional>
#include <string>

namespace backplane::testing {

class KeepSegvInChild {
 public:
  KeepSegvInChild() {
    for (Saved& saved : saved_) {
      if (const char* old = std::getenv(saved.name)) saved.value = old;
      ::setenv(saved.name, (saved.value.value_or("") + ":handle_segv=0").c_str(), 1);
    }
  }
  ~KeepSegvInChild() {
    for (const Saved& saved : saved_) {
      if (saved.value) {
        ::setenv(saved.name, saved.value->c_str(), 1);
      } else {
        ::unsetenv(saved.name);
      }
    }
  }

 private:
  struct Saved {
    const char* name;
    std::optional<std::string> value;
  };
  Saved saved_[2] = {{"ASAN_OPTIONS", std::nullopt}, {"TSAN_OPTIONS", std::nullopt}};
};

}  // namespace backplane::testing
