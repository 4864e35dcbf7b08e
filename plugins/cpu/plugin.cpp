// Entry point of the CPU backend plugin: the one exported symbol and the
// static table. The backend itself lives in cpu_backend.{hpp,cpp}.
#include "cpu_backend.hpp"

#include <backplane/plugin.h>

#ifndef BP_CPU_PLUGIN_VERSION
#define BP_CPU_PLUGIN_VERSION "unversioned"
#endif

namespace {

namespace cpu = backplane::cpu;

constexpr char kVersion[] = BP_CPU_PLUGIN_VERSION;

constexpr BP_PluginApi kApi = {
    .struct_size = sizeof(BP_PluginApi),
    .abi_major = BP_ABI_MAJOR,
    .abi_minor = BP_ABI_MINOR,
    .name = cpu::kBackendName,
    .name_size = sizeof(cpu::kBackendName) - 1,
    .version = kVersion,
    .version_size = sizeof(kVersion) - 1,
    .priority = cpu::kPriority,
    .capabilities = cpu::kCapabilities,
    .backend_create = cpu::backend_create,
    .backend_destroy = cpu::backend_destroy,
    .probe = cpu::probe,
    .device_count = cpu::device_count,
    .device_info = cpu::device_info,
    .memory_allocate = cpu::memory_allocate,
    .memory_free = cpu::memory_free,
    .copy_to_device = cpu::copy_to_device,
    .copy_to_host = cpu::copy_to_host,
    .copy_device_to_device = cpu::copy_device_to_device,
    .copy_to_device_async = cpu::copy_to_device_async,
    .copy_to_host_async = cpu::copy_to_host_async,
    .copy_device_to_device_async = cpu::copy_device_to_device_async,
    .event_wait = cpu::event_wait,
    .event_query = cpu::event_query,
    .event_destroy = cpu::event_destroy,
    .convert_integers = nullptr,  // BP_CAPABILITY_CONVERT_INTEGERS not offered
    .memory_wrap = cpu::memory_wrap,
    .dlpack_device_type = 1,  // kDLCPU
};

}  // namespace

// This plugin speaks ABI major 1 only. It returns its table whatever the core
// offers, so that a core without major 1 can report both versions.
extern "C" BP_PLUGIN_EXPORT const BP_PluginApi* backplane_plugin_entry(
    const BP_PluginEntryArgs* /*args*/) noexcept {
  return &kApi;
}
