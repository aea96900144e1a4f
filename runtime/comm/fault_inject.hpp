#pragma once
// Injected faults, for the fault-injection tests: env TESSERA_FAULT_INJECT lists
// SITE:RANK[:NTH] items (comma separated); the NTH time (1-based, default 1) world rank
// RANK passes fault_point(SITE), it returns true and the caller fails there as it would
// for real (an HDF5 write reporting ENOSPC, an exception inside a training step).
// Unset: fault_point() is one flag test.
#include "runtime/floor.hpp"

#include <string>

namespace tessera {

bool fault_point(const std::string& site);

}  // namespace tessera
