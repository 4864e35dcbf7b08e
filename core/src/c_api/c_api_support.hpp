// What every exported C function shares: the thread-local last error, the one
// guard that turns exceptions into status codes, and handle checks.
//
// The exported functions are defined at global scope, naming what they use
// with using-declarations: GCC gives a C function defined inside a namespace
// hidden visibility, whatever backplane.h declared, and it would not be
// exported.
#pragma once

#include <backplane/backplane.h>
#include <backplane/struct_size.h>
#include <backplane/array.hpp>
#include <backplane/backplane.hpp>

#include "util/caught_error.hpp"
#include "util/error_codes.hpp"

#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace backplane::c_api {

void set_last_error(std::string_view message) noexcept;

// Runs `body` (returning nothing) and maps any exception to a status, recording
// its message. The only way an exported function reaches C++ code.
template <class Body>
bp_status guarded(Body&& body) noexcept {
  try {
    body();
    return BP_OK;
  } catch (...) {
    const detail::CaughtError caught = detail::caught_error();
    set_last_error(caught.message);
    return static_cast<bp_status>(caught.code);  // numbered alike: util/error_codes.hpp
  }
}

// The live handles of one type, each owned through a shared_ptr. A destroyed
// (or foreign) handle is reported by address instead of being dereferenced:
// reading a freed handle to check a magic field would itself be a use after
// free. Every exported function holds a reference (acquire) for the whole
// call, so destroying a handle while another thread is inside a call on it
// only unregisters it: new calls fail cleanly and the object is deleted when
// the last call in flight returns, on that thread. The cost on the hot path is
// the lookup that was already there plus one atomic increment and decrement.
// Detection is best effort once an address is reused by a new handle, which
// cannot happen while a call still holds the old one.
//
// Each registry is made by make_live_handles (below), with `new`, and never
// destroyed: the destructor is deleted and the constructor private, so a
// registry declared as a static object does not compile. A handle the
// embedder never destroyed is still live at exit, and destroying it then
// would call into its plugin after the C++ runtime may already have destroyed
// the plugin's own statics (a plugin loaded after the registry was made has
// its destructors run first). So at exit what is live stays as it is,
// reachable from the registry (leak checkers do not report it), and no plugin
// is called.
template <class Handle>
class LiveHandles {
 public:
  ~LiveHandles() = delete;
  LiveHandles(const LiveHandles&) = delete;
  LiveHandles& operator=(const LiveHandles&) = delete;

  Handle* add(std::shared_ptr<Handle> handle) {
    Handle* address = handle.get();
    std::lock_guard lock(mutex_);
    handles_.emplace(address, std::move(handle));
    return address;
  }
  // A reference keeping the handle alive, or null when it is not live.
  std::shared_ptr<Handle> acquire(const Handle* handle) const {
    if (handle == nullptr) return nullptr;
    std::lock_guard lock(mutex_);
    auto found = handles_.find(handle);
    return found == handles_.end() ? nullptr : found->second;
  }
  // Unregisters the handle and hands back the registry's reference (null when
  // it was not live: destroyed twice, or never ours). Dropping it outside the
  // lock deletes the object unless a call still holds it: a deleter that runs
  // foreign code (DLPack) must not run under the lock.
  std::shared_ptr<Handle> remove(const Handle* handle) {
    return remove_if(handle, [](const Handle&) { return true; });
  }
  // As remove, only when `predicate(*handle)` holds, both under one lock (no
  // check-then-act race between two destroyers).
  template <class Predicate>
  std::shared_ptr<Handle> remove_if(const Handle* handle, Predicate&& predicate) {
    if (handle == nullptr) return nullptr;
    std::lock_guard lock(mutex_);
    auto found = handles_.find(handle);
    if (found == handles_.end() || !predicate(*found->second)) return nullptr;
    std::shared_ptr<Handle> owned = std::move(found->second);
    handles_.erase(found);
    return owned;
  }

 private:
  LiveHandles() = default;
  template <class Any>
  friend LiveHandles<Any>& make_live_handles();

  mutable std::mutex mutex_;
  std::unordered_map<const Handle*, std::shared_ptr<Handle>> handles_;
};

// The one way to make a registry: each file that owns a handle type holds
// `LiveHandles<T>& live_t = make_live_handles<T>();` in its anonymous
// namespace, once.
template <class Handle>
LiveHandles<Handle>& make_live_handles() {
  return *new LiveHandles<Handle>;  // never destroyed: see LiveHandles
}

// Throws Error(kInvalidArgument, "<function>: <what> is NULL") when pointer is NULL.
void require_non_null(const void* pointer, const char* function, const char* what);

// Throws Error(kInvalidArgument, "<function>: <what>->struct_size N is smaller
// than SIZE (set it to sizeof)") when `given` is below `size`.
void require_struct_size(std::size_t given, std::size_t size, const char* function, const char* what);

// The C++ runtime behind a handle, kept alive while the result is held (hold
// it for the whole call); throws for NULL or destroyed handles.
std::shared_ptr<Runtime> runtime_of(bp_runtime* handle, const char* function);

Device to_device(const bp_device& device);
bp_device from_device(const Device& device);

// `device` resolved against the runtime (full error messages), or the default
// device on the calling thread when it is NULL.
Device device_or_default(Runtime& runtime, const bp_device* device);

// Arrays (c_api_arrays.cpp): a new registered handle owning one reference,
// and the Array behind a handle, kept alive while the result is held (throws
// for NULL or destroyed handles).
bp_array* new_array_handle(Array array);
std::shared_ptr<const Array> array_of(const bp_array* handle, const char* function);

// What a tensor map or a token-file list holds: arrays under their names
// (or paths), in bytewise order; and its entry `index`, or
// Error(kOutOfRange, "<function>: index I is out of range: N <noun>").
using NamedArrays = std::vector<std::pair<std::string, Array>>;
const NamedArrays::value_type& entry_at(const NamedArrays& entries, std::size_t index, const char* function,
                                        const char* noun);

// The DType behind a bp_dtype; throws kInvalidArgument naming `function`.
DType dtype_of(bp_dtype dtype, const char* function);

}  // namespace backplane::c_api
