// libFuzzer entry for the token_headers target (see targets.hpp).
#include "targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  backplane::fuzz::token_headers({data, size});
  return 0;
}
