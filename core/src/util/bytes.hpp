// Sizes in messages: "32.0 MiB (33554432 bytes)", so an error is readable and
// exact at once.
#pragma once

#include <cstdint>
#include <string>

namespace backplane::detail {

std::string describe_bytes(std::uint64_t bytes);

}  // namespace backplane::detail
