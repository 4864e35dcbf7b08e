#include "util/dlpack_device.hpp"

#include <fmt/format.h>

#include <iterator>
#include <string_view>

namespace backplane::detail {

bool is_known_dlpack_device_type(std::int32_t type) noexcept {
  return (type >= kDLCPU && type <= kDLOpenCL) || (type >= kDLVulkan && type <= kDLMAIACode);
}

bool is_dlpack_host_type(std::int32_t type) noexcept {
  return type == kDLCPU || type == kDLCUDAHost || type == kDLROCMHost;
}

std::string dlpack_device_type_name(std::int32_t type) {
  // DLPack 1.0's list; the values are fixed by the format.
  static constexpr std::string_view kNames[] = {
      "",          "kDLCPU",         "kDLCUDA",   "kDLCUDAHost", "kDLOpenCL",  "",
      "",          "kDLVulkan",      "kDLMetal",  "kDLVPI",      "kDLROCM",    "kDLROCMHost",
      "kDLExtDev", "kDLCUDAManaged", "kDLOneAPI", "kDLWebGPU",   "kDLHexagon", "kDLMAIA"};
  static_assert(std::size(kNames) == kDLMAIACode + 1);
  if (is_known_dlpack_device_type(type)) return fmt::format("{} ({})", type, kNames[type]);
  return std::to_string(type);
}

}  // namespace backplane::detail
