// What every exported C function shares: the thread-local last error, the one
// guard that turns exceptions into status codes, and handle checks.
#pragma once

#include <backplane/backplane.h>
#include <backplane/array.hpp>
#include <backplane/backplane.hpp>

#include <mutex>
#include <string>
#include <string_view>
#include <unordered_set>

namespace backplane::c_api {

void set_last_error(std::string_view message) noexcept;

// Runs `body` (returning nothing) and maps any exception to a status, recording
// its message. The only way an exported function reaches C++ code.
template <class Body>
bp_status guarded(Body&& body) noexcept {
  try {
    body();
    return BP_OK;
  } catch (const Error& error) {
    set_last_error(error.what());
    return static_cast<bp_status>(error.code());
  } catch (const std::bad_alloc&) {
    set_last_error("out of host memory");
    return BP_STATUS_OUT_OF_MEMORY;
  } catch (const std::exception& error) {
    set_last_error(std::string("internal error: ") + error.what());
    return BP_STATUS_INTERNAL;
  } catch (...) {
    set_last_error("internal error: unknown exception");
    return BP_STATUS_INTERNAL;
  }
}

// The live handles of one type. A destroyed (or foreign) handle is reported
// by address instead of being dereferenced: reading a freed handle to check a
// magic field would itself be a use after free. Detection is best effort
// once an address is reused by a new handle.
template <class Handle>
class LiveHandles {
 public:
  Handle* add(Handle* handle) {
    std::lock_guard lock(mutex_);
    handles_.insert(handle);
    return handle;
  }
  // False when the handle was not live (destroyed twice, or never ours).
  bool remove(const Handle* handle) {
    std::lock_guard lock(mutex_);
    return handles_.erase(handle) != 0;
  }
  // Removes the handle only when it is live and `predicate(*handle)` holds,
  // both under one lock (no check-then-act race between two destroyers).
  template <class Predicate>
  bool remove_if(Handle* handle, Predicate&& predicate) {
    std::lock_guard lock(mutex_);
    if (handle == nullptr || handles_.count(handle) == 0 || !predicate(*handle)) return false;
    handles_.erase(handle);
    return true;
  }
  bool contains(const Handle* handle) const {
    std::lock_guard lock(mutex_);
    return handle != nullptr && handles_.count(handle) != 0;
  }

 private:
  mutable std::mutex mutex_;
  std::unordered_set<const Handle*> handles_;
};

// Throws Error(kInvalidArgument, "<function>: <what> is NULL") when pointer is NULL.
void require_non_null(const void* pointer, const char* function, const char* what);

// The C++ runtime behind a handle; throws for NULL or destroyed handles.
Runtime& runtime_of(bp_runtime* handle, const char* function);

Device to_device(const bp_device& device);
bp_device from_device(const Device& device);

// `device` resolved against the runtime (full error messages), or the default
// device on the calling thread when it is NULL.
Device device_or_default(Runtime& runtime, const bp_device* device);

// Arrays (c_api_arrays.cpp): a new registered handle owning one reference,
// and the Array behind a handle (throws for NULL or destroyed handles).
bp_array* new_array_handle(Array array);
const Array& array_of(const bp_array* handle, const char* function);

// The DType behind a bp_dtype; throws kInvalidArgument naming `function`.
DType dtype_of(bp_dtype dtype, const char* function);

}  // namespace backplane::c_api
