// libFuzzer entry for the plugin_table target (see targets.hpp).
#include "targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  backplane::fuzz::plugin_table({data, size});
  return 0;
}
