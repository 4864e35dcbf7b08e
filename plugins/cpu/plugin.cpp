// The CPU backend plugin's one exported symbol; the backend is cpu_backend.hpp.
#include "cpu_backend.hpp"

BACKPLANE_PLUGIN_SDK_ENTRY(backplane::cpu::CpuBackend)
