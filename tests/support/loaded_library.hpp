// Whether a shared library is mapped in this process now, without loading
// it: RTLD_NOLOAD, and the reference that takes on a loaded library given
// back, so asking never keeps a library loaded.
#pragma once

#include <dlfcn.h>

#include <filesystem>

namespace backplane::testing {

inline bool is_loaded(const std::filesystem::path& file) {
  void* handle = ::dlopen(file.c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (handle != nullptr) ::dlclose(handle);
  return handle != nullptr;
}

}  // namespace backplane::testing
