// The CPU backend: device memory is ordinary host memory.
//
// Implements (ABI 1.1):
//   backend_create/destroy, probe, device_count, device_info,
//   memory_allocate/free (BP_MEMORY_DEVICE and BP_MEMORY_PINNED_HOST, both
//     plain host memory aligned to kAlignment bytes; size 0 is valid),
//   memory_wrap (any host memory, on any cpu device; memory_free releases the
//     handle only),
//   copy_to_device, copy_to_host, copy_device_to_device (memcpy/memmove with
//     bounds checks),
//   the three async copies (run inline and return an already-completed event,
//     hence no BP_CAPABILITY_ASYNC), event_wait/query/destroy.
// Not implemented: convert_integers (NULL in the table; capability absent).
//
// Options (string values):
//   devices = N   strict integer 1..64, default 1: N devices "cpu:0".."cpu:N-1",
//                 all sharing the host's memory (for multi-device testing).
//
// Errors: a NULL, foreign or already-freed backend/buffer/event handle is
// BP_ERROR_INVALID_ARGUMENT; a bad ordinal or copy range is
// BP_ERROR_OUT_OF_RANGE; a failed allocation is BP_ERROR_OUT_OF_MEMORY with
// the size asked and the host's free/total memory.
//
// Thread-safety: every function may be called from any thread; calls on one
// backend are serialised only around its bookkeeping, never around copies.
#ifndef BACKPLANE_PLUGINS_CPU_CPU_BACKEND_HPP
#define BACKPLANE_PLUGINS_CPU_CPU_BACKEND_HPP

#include <backplane/plugin.h>

#include <cstddef>
#include <cstdint>

namespace backplane::cpu {

inline constexpr char kBackendName[] = "cpu";
inline constexpr std::int32_t kPriority = 10;
inline constexpr BP_Capabilities kCapabilities =
    BP_CAPABILITY_HOST_ADDRESSABLE | BP_CAPABILITY_PINNED_HOST | BP_CAPABILITY_WRAP_MEMORY;
// Every buffer's address is a multiple of this (a cache line; enough for AVX-512).
inline constexpr std::size_t kAlignment = 64;
inline constexpr std::int32_t kMaxDevices = 64;

// The table entries. Each is noexcept and reports failures as BP_Error*.
BP_Error* backend_create(BP_BackendCreateArgs* args) noexcept;
void backend_destroy(BP_Backend* backend) noexcept;
BP_Error* probe(BP_ProbeArgs* args) noexcept;
BP_Error* device_count(BP_DeviceCountArgs* args) noexcept;
BP_Error* device_info(BP_DeviceInfoArgs* args) noexcept;
BP_Error* memory_allocate(BP_MemoryAllocateArgs* args) noexcept;
BP_Error* memory_free(BP_MemoryFreeArgs* args) noexcept;
BP_Error* memory_wrap(BP_MemoryWrapArgs* args) noexcept;
BP_Error* copy_to_device(BP_CopyToDeviceArgs* args) noexcept;
BP_Error* copy_to_host(BP_CopyToHostArgs* args) noexcept;
BP_Error* copy_device_to_device(BP_CopyDeviceToDeviceArgs* args) noexcept;
BP_Error* copy_to_device_async(BP_CopyToDeviceArgs* args) noexcept;
BP_Error* copy_to_host_async(BP_CopyToHostArgs* args) noexcept;
BP_Error* copy_device_to_device_async(BP_CopyDeviceToDeviceArgs* args) noexcept;
BP_Error* event_wait(BP_EventArgs* args) noexcept;
BP_Error* event_query(BP_EventArgs* args) noexcept;
void event_destroy(BP_Backend* backend, BP_Event* event) noexcept;

}  // namespace backplane::cpu

#endif  // BACKPLANE_PLUGINS_CPU_CPU_BACKEND_HPP
