// libFuzzer entry for the config target (see targets.hpp).
#include "targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  backplane::fuzz::config({data, size});
  return 0;
}
