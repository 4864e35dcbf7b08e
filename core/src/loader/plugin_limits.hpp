// The largest sizes and counts the core accepts from a plugin. A plugin's
// answers are untrusted: a size is used to copy a string and a count to
// size a vector, so a lie of 2^40 would be an out-of-memory for the whole
// process (or a read far past the plugin's buffer). An answer beyond these
// limits marks that plugin broken and names the call and the value.
#pragma once

#include <backplane/plugin_support.hpp>

#include <cstddef>
#include <cstring>
#include <string_view>

namespace backplane::detail {

inline constexpr int kMaxPluginDevices = 4096;
inline constexpr std::size_t kMaxBackendNameSize = 64;
inline constexpr std::size_t kMaxPluginVersionSize = 256;
// Reasons, error messages, device names, attribute keys and values; the
// plugin SDK cuts what its plugins answer to the same bound.
inline constexpr std::size_t kMaxPluginTextSize = plugin_sdk::kMaxTextSize;
inline constexpr std::size_t kMaxDeviceAttributes = 1024;
// Memory kinds of one device (ABI 1.4); PJRT devices have three.
inline constexpr std::size_t kMaxDeviceMemories = 64;

// The text of a (pointer, size) pair from a plugin, cut at the first NUL: a
// size larger than the string it describes must not read past the string's
// terminator. Empty for NULL. `size` must already be within its limit.
inline std::string_view plugin_text(const char* data, std::size_t size) noexcept {
  return data == nullptr ? std::string_view() : std::string_view(data, ::strnlen(data, size));
}

}  // namespace backplane::detail
