// The real CPU backend behind a table as a plugin built against an older ABI
// would hand out. BACKPLANE_FIXTURE_ABI_MINOR 0 (this directory): abi_minor 0,
// struct_size ending at convert_integers, no BP_CAPABILITY_WRAP_MEMORY. 1
// (tests/plugins/abi_1_1): abi_minor 1, struct_size ending at memory_wrap,
// with memory_wrap. They show that the core still runs 1.0 and 1.1 plugins
// and refuses later features on them with a message instead of reading past
// their table.
#include "cpu_backend.hpp"

#include <backplane/plugin.h>

#include <cstddef>

namespace {

namespace cpu = backplane::cpu;
using backplane::plugin_sdk::Mode;

constexpr char kVersion[] = BACKPLANE_FIXTURE_VERSION;

#ifndef BACKPLANE_FIXTURE_ABI_MINOR
#define BACKPLANE_FIXTURE_ABI_MINOR 0
#endif

#if BACKPLANE_FIXTURE_ABI_MINOR == 0
// Lies past struct_size. The core must not call it (the table does not
// advertise BP_CAPABILITY_WRAP_MEMORY either); if it ever did, the error
// says what went wrong instead of a plausible success.
BP_Error* read_past_the_table(BP_MemoryWrapArgs* /*args*/) noexcept {
  static BP_Error error{sizeof(BP_Error), BP_ERROR_INTERNAL,
                        "the core called memory_wrap of a 1.0 table (past its struct_size)", 66, [](BP_Error*) {}};
  return &error;
}

constexpr std::size_t kTableSize = BP_PLUGIN_API_SIZE_1_0;
constexpr BP_Capabilities kCapabilities = BP_CAPABILITY_HOST_ADDRESSABLE | BP_CAPABILITY_PINNED_HOST;
constexpr auto kMemoryWrap = read_past_the_table;
#else
constexpr std::size_t kTableSize = BP_PLUGIN_API_SIZE_1_1;
constexpr BP_Capabilities kCapabilities =
    BP_CAPABILITY_HOST_ADDRESSABLE | BP_CAPABILITY_PINNED_HOST | BP_CAPABILITY_WRAP_MEMORY;
constexpr auto kMemoryWrap = cpu::Entries::memory_wrap;
#endif

constexpr BP_PluginApi kApi = {
    .struct_size = kTableSize,
    .abi_major = 1,
    .abi_minor = BACKPLANE_FIXTURE_ABI_MINOR,
    .name = "cpu",
    .name_size = 3,
    .version = kVersion,
    .version_size = sizeof(kVersion) - 1,
    .priority = cpu::CpuBackend::kIdentity.priority,
    .capabilities = kCapabilities,
    .backend_create = cpu::Entries::backend_create,
    .backend_destroy = cpu::Entries::backend_destroy,
    .probe = cpu::Entries::probe,
    .device_count = cpu::Entries::device_count,
    .device_info = cpu::Entries::device_info,
    .memory_allocate = cpu::Entries::memory_allocate,
    .memory_free = cpu::Entries::memory_free,
    .copy_to_device = cpu::Entries::copy_to_device<Mode::kBlocking>,
    .copy_to_host = cpu::Entries::copy_to_host<Mode::kBlocking>,
    .copy_device_to_device = cpu::Entries::copy_device_to_device<Mode::kBlocking>,
    .copy_to_device_async = cpu::Entries::copy_to_device<Mode::kAsync>,
    .copy_to_host_async = cpu::Entries::copy_to_host<Mode::kAsync>,
    .copy_device_to_device_async = cpu::Entries::copy_device_to_device<Mode::kAsync>,
    .event_wait = cpu::Entries::event_wait,
    .event_query = cpu::Entries::event_query,
    .event_destroy = cpu::Entries::event_destroy,
    .convert_integers = nullptr,
    .memory_wrap = kMemoryWrap,
    // Past struct_size too: 2 (kDLCUDA) would send DLPack imports here and
    // export host memory as device memory if the core ever read it.
    .dlpack_device_type = 2,
    .event_timing = nullptr,
};

}  // namespace

extern "C" BP_PLUGIN_EXPORT const BP_PluginApi* backplane_plugin_entry(const BP_PluginEntryArgs* /*args*/) noexcept {
  return &kApi;
}
