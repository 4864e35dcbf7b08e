// The thread's default-device scopes, shared by DefaultDeviceScope and the C
// API's push/pop so that both check exits against the same stack.
#pragma once

#include <backplane/backplane.hpp>

#include <cstdint>
#include <string_view>

namespace backplane::detail {

// Enters `device` as the innermost scope of `runtime_id` on this thread and
// returns its token (unique in the process, never 0).
std::uint64_t enter_scope(std::uint64_t runtime_id, Device device);

// Throws Error(kInvalidArgument), prefixed with `function`, unless `token` is
// open on this thread, belongs to `runtime_id` and is that runtime's
// innermost scope here. The message names the scope being exited and the
// inner one still open. Changes nothing.
void check_scope_exit(std::uint64_t runtime_id, std::uint64_t token, std::string_view function);

// Removes exactly the scope `token`, wherever it is in the stack. False when
// no such scope is open on this thread. Never throws.
bool remove_scope(std::uint64_t token) noexcept;

}  // namespace backplane::detail
