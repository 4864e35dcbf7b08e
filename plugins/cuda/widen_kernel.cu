// Widening kernel; see widen_kernel.hpp.
//
// Launched through the CUDA runtime (static cudart, linked by nvcc): the
// runtime uses the context the backend made current with the driver API, so
// no second context appears. cudart opens libcuda lazily, on its first call,
// which only happens after probe found a working driver.
#include "widen_kernel.hpp"

#include <cuda_runtime.h>

#include <algorithm>

namespace backplane::cuda {
namespace {

constexpr unsigned kThreadsPerBlock = 256;
constexpr std::uint64_t kMaxBlocks = 65535;  // grid-stride loop covers the rest

template <class Source, class Destination>
__global__ void widen(const Source* __restrict__ source, Destination* __restrict__ destination, std::uint64_t count) {
  const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
  for (std::uint64_t index = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; index < count;
       index += stride) {
    destination[index] = static_cast<Destination>(source[index]);
  }
}

template <class Source, class Destination>
LaunchStatus launch(const void* source, void* destination, std::uint64_t count, cudaStream_t stream) {
  const std::uint64_t blocks = std::min<std::uint64_t>((count + kThreadsPerBlock - 1) / kThreadsPerBlock, kMaxBlocks);
  widen<Source, Destination><<<static_cast<unsigned>(blocks), kThreadsPerBlock, 0, stream>>>(
      static_cast<const Source*>(source), static_cast<Destination*>(destination), count);
  const cudaError_t error = cudaGetLastError();
  if (error == cudaSuccess) return {};
  return {static_cast<int>(error), cudaGetErrorName(error), cudaGetErrorString(error)};
}

template <class Source>
LaunchStatus launch_from(const void* source, void* destination, BP_IntegerType destination_type, std::uint64_t count,
                         cudaStream_t stream) {
  switch (destination_type) {
    case BP_INTEGER_U16: return launch<Source, std::uint16_t>(source, destination, count, stream);
    case BP_INTEGER_U32: return launch<Source, std::uint32_t>(source, destination, count, stream);
    case BP_INTEGER_I32: return launch<Source, std::int32_t>(source, destination, count, stream);
    case BP_INTEGER_I64: return launch<Source, std::int64_t>(source, destination, count, stream);
    default: return {-1, "unsupported", "unsupported destination type"};
  }
}

}  // namespace

std::uint64_t integer_type_size(BP_IntegerType type) noexcept {
  switch (type) {
    case BP_INTEGER_U8: return 1;
    case BP_INTEGER_U16: return 2;
    case BP_INTEGER_U32: return 4;
    case BP_INTEGER_I32: return 4;
    case BP_INTEGER_I64: return 8;
    default: return 0;
  }
}

bool widen_supported(BP_IntegerType source_type, BP_IntegerType destination_type) noexcept {
  const bool unsigned_source =
      source_type == BP_INTEGER_U8 || source_type == BP_INTEGER_U16 || source_type == BP_INTEGER_U32;
  // Strictly wider holds every value: an unsigned destination trivially, a
  // signed one because it has a spare bit (so U32 -> I32 is refused).
  return unsigned_source && integer_type_size(destination_type) > integer_type_size(source_type);
}

LaunchStatus widen_kernel_status() noexcept {
  cudaFuncAttributes attributes{};
  const cudaError_t error = cudaFuncGetAttributes(&attributes, widen<std::uint16_t, std::int64_t>);
  if (error == cudaSuccess) return {};
  cudaGetLastError();  // not sticky: leave no error behind for a later launch
  return {static_cast<int>(error), cudaGetErrorName(error), cudaGetErrorString(error)};
}

LaunchStatus launch_widen(const void* source, BP_IntegerType source_type, void* destination,
                          BP_IntegerType destination_type, std::uint64_t count, void* stream) noexcept {
  if (count == 0) return {};
  auto* cuda_stream = static_cast<cudaStream_t>(stream);
  switch (source_type) {
    case BP_INTEGER_U8: return launch_from<std::uint8_t>(source, destination, destination_type, count, cuda_stream);
    case BP_INTEGER_U16: return launch_from<std::uint16_t>(source, destination, destination_type, count, cuda_stream);
    case BP_INTEGER_U32: return launch_from<std::uint32_t>(source, destination, destination_type, count, cuda_stream);
    default: return {-1, "unsupported", "unsupported source type"};
  }
}

}  // namespace backplane::cuda
