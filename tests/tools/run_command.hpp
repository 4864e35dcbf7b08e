// Forwarding header: run_command lives in tests/support/run_command.hpp. Kept
// only for tests/conformance/test_conformance.cpp, which still includes this
// path; delete it once that file includes "support/run_command.hpp".
#pragma once

#include "../support/run_command.hpp"
