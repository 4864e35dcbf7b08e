// Entry point of the simulated accelerator plugin (tests only): the one
// exported symbol and the static table. The backend is in sim_backend.{hpp,cpp}.
#include "sim_backend.hpp"

#include <backplane/plugin.h>

namespace {

namespace sim = backplane::sim;

constexpr char kVersion[] = "test-only";

constexpr BP_PluginApi kApi = {
    .struct_size = sizeof(BP_PluginApi),
    .abi_major = BP_ABI_MAJOR,
    .abi_minor = BP_ABI_MINOR,
    .name = sim::kBackendName,
    .name_size = sizeof(sim::kBackendName) - 1,
    .version = kVersion,
    .version_size = sizeof(kVersion) - 1,
    .priority = sim::kPriority,
    .capabilities = sim::kCapabilities,
    .backend_create = sim::backend_create,
    .backend_destroy = sim::backend_destroy,
    .probe = sim::probe,
    .device_count = sim::device_count,
    .device_info = sim::device_info,
    .memory_allocate = sim::memory_allocate,
    .memory_free = sim::memory_free,
    .copy_to_device = sim::copy_to_device,
    .copy_to_host = sim::copy_to_host,
    .copy_device_to_device = sim::copy_device_to_device,
    .copy_to_device_async = sim::copy_to_device_async,
    .copy_to_host_async = sim::copy_to_host_async,
    .copy_device_to_device_async = sim::copy_device_to_device_async,
    .event_wait = sim::event_wait,
    .event_query = sim::event_query,
    .event_destroy = sim::event_destroy,
    .convert_integers = nullptr,
    .memory_wrap = sim::memory_wrap,
    .dlpack_device_type = sim::kDlpackDeviceType,
};

}  // namespace

extern "C" BP_PLUGIN_EXPORT const BP_PluginApi* backplane_plugin_entry(
    const BP_PluginEntryArgs* /*args*/) noexcept {
  return &kApi;
}
