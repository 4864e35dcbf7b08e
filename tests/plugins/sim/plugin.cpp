// The simulated accelerator plugin's one exported symbol (tests only); the
// backend is sim_backend.hpp.
#include "sim_backend.hpp"

BACKPLANE_PLUGIN_SDK_ENTRY(backplane::sim::SimBackend)
