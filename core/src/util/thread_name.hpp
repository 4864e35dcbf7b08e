// Names for the library's own threads, as the trace's tracks and the
// system's tools (top -H, gdb, py-spy) show them.
#pragma once

#include <string>
#include <string_view>

namespace backplane::detail {

// Names the calling thread: `name` for this_thread_name() (up to 127
// bytes), `system_name` for the system, whose limit is 15 bytes (cut there).
// Never throws.
void name_this_thread(std::string_view name, std::string_view system_name) noexcept;
// The same name for both.
inline void name_this_thread(std::string_view name) noexcept { name_this_thread(name, name); }
// The name given by name_this_thread, else the system's ("python" for a
// thread that inherited its process's), else "thread".
std::string this_thread_name();

}  // namespace backplane::detail
