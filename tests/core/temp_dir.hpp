// Forwarding header: TempDir lives in tests/support/temp_dir.hpp. Kept only
// for tests/conformance/test_conformance.cpp, which still includes this path;
// delete it once that file includes "support/temp_dir.hpp".
#pragma once

#include "../support/temp_dir.hpp"
