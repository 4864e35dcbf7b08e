// libFuzzer entry for the trace_summary target (see targets.hpp).
#include "targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  backplane::fuzz::trace_summary({data, size});
  return 0;
}
