// bp_device_*, bp_default_device_*: selectors, device info, the default device.
#include "c_api/c_api_support.hpp"
#include "registry/runtime_impl.hpp"
#include "registry/scoped_overrides.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

struct bp_device_info {
  backplane::DeviceInfo info;
};

namespace backplane::c_api {
namespace {

static_assert(static_cast<int>(BackendStatus::kShadowed) == BP_BACKEND_SHADOWED);
static_assert(static_cast<int>(DeviceSource::kAutomatic) == BP_SOURCE_AUTOMATIC);
static_assert(static_cast<int>(DeviceSource::kLocalRank) == BP_SOURCE_LOCAL_RANK);
static_assert(static_cast<int>(DeviceKind::kAccelerator) == BP_DEVICE_ACCELERATOR);

// Scopes pushed through the C API on this thread, innermost last; the stack
// they live on (shared with C++ scopes) is in registry/scoped_overrides.
struct PushedScope {
  std::uint64_t runtime_id;
  std::uint64_t token;
};
thread_local std::vector<PushedScope> pushed_scopes;

// bp_default_device_describe's string, valid until its next call here.
thread_local std::string described;

std::uint64_t push_scope(bp_runtime* runtime, const char* selector, const char* function) {
  const auto runtime_lease = runtime_of(runtime, function);
  Runtime& cxx = *runtime_lease;
  require_non_null(selector, function, "selector");
  Device device = cxx.resolve(selector);
  pushed_scopes.reserve(pushed_scopes.size() + 1);  // no failure after entering
  const std::uint64_t token = detail::enter_scope(detail::RuntimeAccess::registry(cxx).id, std::move(device));
  pushed_scopes.push_back({detail::RuntimeAccess::registry(cxx).id, token});
  return token;
}

void pop_scope(std::uint64_t runtime_id, std::uint64_t token, const char* function) {
  detail::check_scope_exit(runtime_id, token, function);
  auto pushed = std::find_if(pushed_scopes.begin(), pushed_scopes.end(),
                             [&](const PushedScope& scope) { return scope.token == token; });
  if (pushed == pushed_scopes.end()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: default-device scope with token {} was entered by a C++ DefaultDeviceScope; it "
                            "exits when that object is destroyed",
                            function, token));
  }
  pushed_scopes.erase(pushed);
  detail::remove_scope(token);
}

// What bp_default_device and bp_default_device_describe share: the choice,
// written to `out` and `source` (which may be NULL).
DefaultDevice write_default_device(bp_runtime* runtime, bp_device* out, bp_device_source* source,
                                   const char* function) {
  const auto runtime_lease = runtime_of(runtime, function);
  require_non_null(out, function, "out");
  DefaultDevice chosen = runtime_lease->default_device();
  *out = from_device(chosen.device);
  if (source != nullptr) *source = static_cast<bp_device_source>(chosen.source);
  return chosen;
}

LiveHandles<bp_device_info>& live_infos = make_live_handles<bp_device_info>();

// The info kept alive for the call; null when NULL or destroyed.
std::shared_ptr<bp_device_info> info_of(const bp_device_info* info) { return live_infos.acquire(info); }

}  // namespace
}  // namespace backplane::c_api

// The C functions below have C linkage and global scope; they call the
// C++ API and the C API's helpers by their short names.
using namespace ::backplane;
using namespace ::backplane::c_api;

extern "C" {

bp_status bp_device_resolve(bp_runtime* runtime, const char* selector, bp_device* out) {
  return guarded([&] {
    const auto cxx = runtime_of(runtime, "bp_device_resolve");
    require_non_null(selector, "bp_device_resolve", "selector");
    require_non_null(out, "bp_device_resolve", "out");
    *out = from_device(cxx->resolve(selector));
  });
}

bp_status bp_device_selector(const bp_device* device, char* buffer, size_t capacity) {
  return guarded([&] {
    require_non_null(device, "bp_device_selector", "device");
    require_non_null(buffer, "bp_device_selector", "buffer");
    std::string text = to_device(*device).selector();
    if (text.size() + 1 > capacity) {
      throw Error(ErrorCode::kOutOfRange, fmt::format("bp_device_selector: '{}' needs {} bytes, capacity is {}", text,
                                                      text.size() + 1, capacity));
    }
    std::memcpy(buffer, text.c_str(), text.size() + 1);
  });
}

bp_status bp_device_count(bp_runtime* runtime, const char* backend, int32_t* out) {
  return guarded([&] {
    const auto cxx = runtime_of(runtime, "bp_device_count");
    require_non_null(backend, "bp_device_count", "backend");
    require_non_null(out, "bp_device_count", "out");
    *out = static_cast<int32_t>(cxx->devices(backend).size());
  });
}

bp_status bp_device_info_create(bp_runtime* runtime, const bp_device* device, bp_device_info** out) {
  return guarded([&] {
    const auto runtime_lease = runtime_of(runtime, "bp_device_info_create");
    Runtime& cxx = *runtime_lease;
    require_non_null(device, "bp_device_info_create", "device");
    require_non_null(out, "bp_device_info_create", "out");
    Device wanted = to_device(*device);
    Device resolved = cxx.resolve(wanted.selector());  // checks backend and ordinal with full messages
    auto devices = cxx.devices(resolved.backend);
    *out = live_infos.add(std::make_shared<bp_device_info>(devices.at(static_cast<std::size_t>(resolved.ordinal))));
  });
}

void bp_device_info_destroy(bp_device_info* info) {
  live_infos.remove(info);  // NULL or destroyed twice: nothing
}

const char* bp_device_info_name(const bp_device_info* info) {
  const auto live = info_of(info);
  return live ? live->info.name.c_str() : "";
}

bp_device_kind bp_device_info_kind(const bp_device_info* info) {
  const auto live = info_of(info);
  return live ? static_cast<bp_device_kind>(live->info.kind) : BP_DEVICE_CPU;
}

uint64_t bp_device_info_memory_total(const bp_device_info* info) {
  const auto live = info_of(info);
  return live ? live->info.memory_total : 0;
}

uint64_t bp_device_info_memory_free(const bp_device_info* info) {
  const auto live = info_of(info);
  return live ? live->info.memory_free.value_or(BP_MEMORY_UNKNOWN) : 0;
}

size_t bp_device_info_attribute_count(const bp_device_info* info) {
  const auto live = info_of(info);
  return live ? live->info.attributes.size() : 0;
}

bp_status bp_device_info_attribute(const bp_device_info* info, size_t index, const char** key, const char** value) {
  return guarded([&] {
    const auto live = info_of(info);
    if (!live) throw Error(ErrorCode::kInvalidArgument, "bp_device_info_attribute: info is NULL or destroyed");
    require_non_null(key, "bp_device_info_attribute", "key");
    require_non_null(value, "bp_device_info_attribute", "value");
    const auto& attributes = live->info.attributes;
    if (index >= attributes.size()) {
      throw Error(
          ErrorCode::kOutOfRange,
          fmt::format("bp_device_info_attribute: index {} is out of range: {} attributes", index, attributes.size()));
    }
    *key = attributes[index].first.c_str();
    *value = attributes[index].second.c_str();
  });
}

size_t bp_device_info_memory_kind_count(const bp_device_info* info) {
  const auto live = info_of(info);
  return live ? live->info.memory_kinds.size() : 0;
}

bp_status bp_device_info_memory_kind(const bp_device_info* info, size_t index, const char** kind) {
  return guarded([&] {
    const auto live = info_of(info);
    if (!live) throw Error(ErrorCode::kInvalidArgument, "bp_device_info_memory_kind: info is NULL or destroyed");
    require_non_null(kind, "bp_device_info_memory_kind", "kind");
    const auto& kinds = live->info.memory_kinds;
    if (index >= kinds.size()) {
      throw Error(ErrorCode::kOutOfRange, fmt::format("bp_device_info_memory_kind: index {} is out of range: {} memory "
                                                      "kinds",
                                                      index, kinds.size()));
    }
    *kind = kinds[index].c_str();
  });
}

bp_status bp_default_device(bp_runtime* runtime, bp_device* out, bp_device_source* source) {
  return guarded([&] { (void)write_default_device(runtime, out, source, "bp_default_device"); });
}

bp_status bp_default_device_describe(bp_runtime* runtime, bp_device* out, bp_device_source* source,
                                     const char** description) {
  return guarded([&] {
    DefaultDevice chosen = write_default_device(runtime, out, source, "bp_default_device_describe");
    if (description != nullptr) {
      described = std::move(chosen.description);
      *description = described.c_str();
    }
  });
}

const char* bp_device_source_name(bp_device_source source) {
  if (source < BP_SOURCE_SCOPED_OVERRIDE || source > BP_SOURCE_LOCAL_RANK) return "unknown source";
  return to_string(static_cast<DeviceSource>(source)).data();  // static literals
}

bp_status bp_default_device_set(bp_runtime* runtime, const char* selector) {
  return guarded([&] {
    const auto runtime_lease = runtime_of(runtime, "bp_default_device_set");
    Runtime& cxx = *runtime_lease;
    if (selector == nullptr) {
      cxx.set_default_device(std::nullopt);
    } else {
      cxx.set_default_device(std::string_view(selector));
    }
  });
}

bp_status bp_default_device_push_scope(bp_runtime* runtime, const char* selector, uint64_t* token) {
  return guarded([&] {
    require_non_null(token, "bp_default_device_push_scope", "token");
    *token = push_scope(runtime, selector, "bp_default_device_push_scope");
  });
}

bp_status bp_default_device_pop_scope(bp_runtime* runtime, uint64_t token) {
  return guarded([&] {
    const auto runtime_lease = runtime_of(runtime, "bp_default_device_pop_scope");
    Runtime& cxx = *runtime_lease;
    pop_scope(backplane::detail::RuntimeAccess::registry(cxx).id, token, "bp_default_device_pop_scope");
  });
}

bp_status bp_default_device_push(bp_runtime* runtime, const char* selector) {
  return guarded([&] { push_scope(runtime, selector, "bp_default_device_push"); });
}

bp_status bp_default_device_pop(bp_runtime* runtime) {
  return guarded([&] {
    const std::uint64_t runtime_id =
        backplane::detail::RuntimeAccess::registry(*runtime_of(runtime, "bp_default_device_pop")).id;
    auto innermost = std::find_if(pushed_scopes.rbegin(), pushed_scopes.rend(),
                                  [&](const PushedScope& scope) { return scope.runtime_id == runtime_id; });
    if (innermost == pushed_scopes.rend()) {
      throw Error(ErrorCode::kInvalidArgument,
                  "bp_default_device_pop: nothing was pushed for this runtime on this thread");
    }
    pop_scope(runtime_id, innermost->token, "bp_default_device_pop");
  });
}

}  // extern "C"
