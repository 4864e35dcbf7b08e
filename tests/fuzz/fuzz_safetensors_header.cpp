// libFuzzer entry for the safetensors_header target (see targets.hpp).
#include "targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  backplane::fuzz::safetensors_header({data, size});
  return 0;
}
