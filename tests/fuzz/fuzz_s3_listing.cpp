// libFuzzer entry for the s3_listing target (see targets.hpp).
#include "targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  backplane::fuzz::s3_listing({data, size});
  return 0;
}
