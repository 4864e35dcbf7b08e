// The plugin's one device kernel: widening unsigned integers on the GPU, so
// token batches cross the bus narrow (uint16) and are widened where they land.
//
// No CUDA header here: the backend passes the stream as an opaque pointer.
#ifndef BACKPLANE_PLUGINS_CUDA_WIDEN_KERNEL_HPP
#define BACKPLANE_PLUGINS_CUDA_WIDEN_KERNEL_HPP

#include <backplane/plugin.h>

#include <cstdint>

namespace backplane::cuda {

// True for the pairs launch_widen accepts: a wider destination that holds
// every source value (U8 -> U16/U32/I32/I64, U16 -> U32/I32/I64, U32 -> I64).
bool widen_supported(BP_IntegerType source_type, BP_IntegerType destination_type) noexcept;

// Bytes per element of an integer type, 0 for an unknown one.
std::uint64_t integer_type_size(BP_IntegerType type) noexcept;

// The outcome of a launch: `code` 0 on success, else the CUDA runtime error.
struct LaunchStatus {
  int code = 0;
  const char* name = "";  // static strings from the runtime
  const char* text = "";
};

// Whether the kernel can run in the context current on the calling thread:
// asks the CUDA runtime for it, which loads it. Fails (code != 0) where the
// runtime cannot start on this driver, or the plugin holds no code for this
// GPU's architecture; a launch would fail the same way.
LaunchStatus widen_kernel_status() noexcept;

// Enqueues `count` conversions on `stream` (a CUstream) in the context
// current on the calling thread. Preconditions: the pair is widen_supported,
// both pointers are device-accessible, suitably aligned and do not overlap.
// Errors found during execution surface on the stream (event_wait).
LaunchStatus launch_widen(const void* source, BP_IntegerType source_type, void* destination,
                          BP_IntegerType destination_type, std::uint64_t count, void* stream) noexcept;

}  // namespace backplane::cuda

#endif  // BACKPLANE_PLUGINS_CUDA_WIDEN_KERNEL_HPP
