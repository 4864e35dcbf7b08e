// DLPack's device types by their dlpack.h names, for every module that
// checks or reports one: a plugin states its memory's type as a plain
// int32_t (plugin.h includes no dlpack.h), and the core checks and names it.
#pragma once

#include <dlpack/dlpack.h>

#include <cstdint>
#include <string>

namespace backplane::detail {

// The device types of DLPack releases after the header we build against
// (Debian's 0.6 ends at kDLCUDAManaged, 13): producers newer than it use them.
inline constexpr std::int32_t kDLOneAPICode = 14;
inline constexpr std::int32_t kDLWebGPUCode = 15;
inline constexpr std::int32_t kDLHexagonCode = 16;
inline constexpr std::int32_t kDLMAIACode = 17;

// A type DLPack defines, up to kDLMAIA (5 and 6 are unassigned).
bool is_known_dlpack_device_type(std::int32_t type) noexcept;
// Host memory in DLPack's terms (kDLCPU, kDLCUDAHost, kDLROCMHost): what any
// host-addressable device can adopt.
bool is_dlpack_host_type(std::int32_t type) noexcept;
// "2 (kDLCUDA)" for a known type, the bare number for any other.
std::string dlpack_device_type_name(std::int32_t type);

}  // namespace backplane::detail
