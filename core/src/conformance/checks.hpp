// The groups of conformance checks, in the order suite.cpp runs them. Each
// group records its own checks (n/a where the backend cannot take them) and
// leaves no buffer or event behind.
#pragma once

#include "conformance/context.hpp"

namespace backplane::conformance {

// checks_devices.cpp: device_info sanity and allocation patterns.
void check_devices(Context& context);
void check_memory(Context& context);

// checks_copies.cpp: synchronous and asynchronous copies, concurrent use.
void check_copies(Context& context);
void check_async(Context& context);
void check_threads(Context& context);

// checks_optional.cpp: host-addressable memory, pinned host memory, convert_integers,
// memory_wrap.
void check_optional(Context& context);
// checks_timing.cpp: device time (ABI 1.3), event_timing when advertised.
void check_timing(Context& context);

// checks_errors.cpp: error paths (bad arguments, handles, sizes, ranges).
void check_argument_errors(Context& context);  // also for unavailable backends
void check_device_errors(Context& context);    // needs a device
void check_error_objects(Context& context);    // last: every BP_Error seen was well-formed

}  // namespace backplane::conformance
