// libFuzzer entry for the json_number target (see targets.hpp).
#include "targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  backplane::fuzz::json_number({data, size});
  return 0;
}
