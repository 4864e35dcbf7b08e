// The OpenCL backend plugin's one exported symbol; the backend is opencl_backend.hpp.
#include "opencl_backend.hpp"

BACKPLANE_PLUGIN_SDK_ENTRY(backplane::opencl::OpenclBackend)
