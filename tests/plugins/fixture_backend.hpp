// A do-nothing backend for the fixture plugins, which exist to drive the
// loader down one path each (incompatible, failed, unavailable...).
//
// A fixture's entry file is a few lines:
//
//   extern "C" BP_PLUGIN_EXPORT const BP_PluginApi* backplane_plugin_entry(
//       const BP_PluginEntryArgs*) noexcept {
//     static const BP_PluginApi table = backplane::testing::make_table(
//         {.name = "unavailable", .available = false, .reason = "..."});
//     return &table;
//   }
//
// The working calls never crash: backend_create/destroy and probe behave as
// the spec says, device_count is `device_count` when available (else 0), and
// every device, buffer or event call is refused with an error (there are no
// devices, buffers or events).
#ifndef BACKPLANE_TESTS_PLUGINS_FIXTURE_BACKEND_HPP
#define BACKPLANE_TESTS_PLUGINS_FIXTURE_BACKEND_HPP

#include <backplane/plugin.h>

#include <cstddef>
#include <cstdint>

namespace backplane::testing {

struct FixtureSpec {
  const char* name = "fixture";  // static string; the table's backend name
  std::uint32_t abi_major = BP_ABI_MAJOR;
  std::uint32_t abi_minor = BP_ABI_MINOR;
  std::size_t struct_size = sizeof(BP_PluginApi);
  bool with_calls = true;  // false: every function pointer NULL
  bool available = true;
  const char* reason = "fixture backend (does nothing)";  // static string
  // Non-zero: probe fails with this code and `reason` as the message.
  BP_ErrorCode probe_error = 0;
  std::int32_t device_count = 0;
};

// The table for `spec`, which is remembered for the calls (one spec per
// plugin file). Call it once, from a function-local static initialiser.
BP_PluginApi make_table(const FixtureSpec& spec) noexcept;

}  // namespace backplane::testing

#endif  // BACKPLANE_TESTS_PLUGINS_FIXTURE_BACKEND_HPP
