// Text arguments that reach the operating system or the C API as C strings:
// a NUL byte would end the text there ("evil.npy\0good.npy" would open
// evil.npy), so text holding one is refused instead of read short.
#pragma once

#include <string_view>

namespace backplane::detail {

// Throws Error(kInvalidArgument, "<function>: <argument> holds a NUL byte at
// offset N") for the first NUL in `text`. The Python package raises the same
// words before a str reaches the C API.
void refuse_nul_bytes(std::string_view text, std::string_view function, std::string_view argument);

}  // namespace backplane::detail
