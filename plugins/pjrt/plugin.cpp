// The pjrt adapter plugin's one exported symbol; the backend is pjrt_backend.hpp.
#include "pjrt_backend.hpp"

BACKPLANE_PLUGIN_SDK_ENTRY(backplane::pjrt::PjrtBackend)
