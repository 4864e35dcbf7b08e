#include "fixture_backend.hpp"

#include <backplane/plugin_support.hpp>

#include <cstring>
#include <string>

namespace backplane::testing {
namespace {

using plugin_sdk::Failure;
using plugin_sdk::guarded;
using plugin_sdk::require_args;

FixtureSpec g_spec;  // set once by make_table, before any call can arrive

struct FixtureBackend {
  int unused = 0;
};

FixtureBackend& backend_of(BP_Backend* backend, const char* call) {
  if (backend == nullptr) throw Failure(BP_ERROR_INVALID_ARGUMENT, std::string(call) + ": backend is NULL");
  return *reinterpret_cast<FixtureBackend*>(backend);
}

template <class Args>
BP_Error* refuse(Args* args, const char* call, BP_ErrorCode code, const char* why) noexcept {
  return guarded([&]() -> BP_Error* {
    require_args(args, call);
    backend_of(args->backend, call);
    throw Failure(code, std::string(g_spec.name) + " fixture: " + call + ": " + why);
  });
}

BP_Error* backend_create(BP_BackendCreateArgs* args) noexcept {
  return guarded([&]() -> BP_Error* {
    require_args(args, "backend_create");
    args->backend = reinterpret_cast<BP_Backend*>(new FixtureBackend{});
    return nullptr;
  });
}

void backend_destroy(BP_Backend* backend) noexcept { delete reinterpret_cast<FixtureBackend*>(backend); }

BP_Error* probe(BP_ProbeArgs* args) noexcept {
  return guarded([&]() -> BP_Error* {
    require_args(args, "probe");
    backend_of(args->backend, "probe");
    if (g_spec.probe_error != 0) throw Failure(g_spec.probe_error, g_spec.reason);
    args->available = g_spec.available ? 1 : 0;
    args->reason = g_spec.reason;
    args->reason_size = std::strlen(g_spec.reason);
    return nullptr;
  });
}

BP_Error* device_count(BP_DeviceCountArgs* args) noexcept {
  return guarded([&]() -> BP_Error* {
    require_args(args, "device_count");
    backend_of(args->backend, "device_count");
    args->count = g_spec.available ? g_spec.device_count : 0;
    return nullptr;
  });
}

constexpr const char* kNoDevice = "no such device";
constexpr const char* kNoBuffer = "no such buffer";

BP_Error* device_info(BP_DeviceInfoArgs* args) noexcept {
  return refuse(args, "device_info", BP_ERROR_OUT_OF_RANGE, kNoDevice);
}
BP_Error* memory_allocate(BP_MemoryAllocateArgs* args) noexcept {
  return refuse(args, "memory_allocate", BP_ERROR_OUT_OF_RANGE, kNoDevice);
}
BP_Error* memory_free(BP_MemoryFreeArgs* args) noexcept {
  if (args != nullptr && args->struct_size >= sizeof(*args) && args->buffer == nullptr) return nullptr;
  return refuse(args, "memory_free", BP_ERROR_INVALID_ARGUMENT, kNoBuffer);
}
BP_Error* copy_to_device(BP_CopyToDeviceArgs* args) noexcept {
  return refuse(args, "copy_to_device", BP_ERROR_INVALID_ARGUMENT, kNoBuffer);
}
BP_Error* copy_to_host(BP_CopyToHostArgs* args) noexcept {
  return refuse(args, "copy_to_host", BP_ERROR_INVALID_ARGUMENT, kNoBuffer);
}
BP_Error* copy_device_to_device(BP_CopyDeviceToDeviceArgs* args) noexcept {
  return refuse(args, "copy_device_to_device", BP_ERROR_INVALID_ARGUMENT, kNoBuffer);
}
BP_Error* event_call(BP_EventArgs* args) noexcept {
  return refuse(args, "event", BP_ERROR_INVALID_ARGUMENT, "no such event");
}
void event_destroy(BP_Backend*, BP_Event*) noexcept {}

}  // namespace

BP_PluginApi make_table(const FixtureSpec& spec) noexcept {
  g_spec = spec;
  BP_PluginApi table{};
  table.struct_size = spec.struct_size;
  table.abi_major = spec.abi_major;
  table.abi_minor = spec.abi_minor;
  table.name = spec.name;
  table.name_size = std::strlen(spec.name);
  table.version = "fixture";
  table.version_size = std::strlen(table.version);
  table.priority = 1;
  table.capabilities = 0;
  if (!spec.with_calls) return table;
  table.backend_create = backend_create;
  table.backend_destroy = backend_destroy;
  table.probe = probe;
  table.device_count = device_count;
  table.device_info = device_info;
  table.memory_allocate = memory_allocate;
  table.memory_free = memory_free;
  table.copy_to_device = copy_to_device;
  table.copy_to_host = copy_to_host;
  table.copy_device_to_device = copy_device_to_device;
  table.copy_to_device_async = copy_to_device;
  table.copy_to_host_async = copy_to_host;
  table.copy_device_to_device_async = copy_device_to_device;
  table.event_wait = event_call;
  table.event_query = event_call;
  table.event_destroy = event_destroy;
  return table;
}

}  // namespace backplane::testing
