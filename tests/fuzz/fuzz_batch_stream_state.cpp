// libFuzzer entry for the batch_stream_state target (see targets.hpp).
#include "targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  backplane::fuzz::batch_stream_state({data, size});
  return 0;
}
