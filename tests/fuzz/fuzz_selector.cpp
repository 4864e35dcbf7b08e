// libFuzzer entry for the selector target (see targets.hpp).
#include "targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  backplane::fuzz::selector({data, size});
  return 0;
}
