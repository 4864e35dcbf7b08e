// The CUDA backend plugin's one exported symbol; the backend is cuda_backend.hpp.
#include "cuda_backend.hpp"

BACKPLANE_PLUGIN_SDK_ENTRY(backplane::cuda::CudaBackend)
