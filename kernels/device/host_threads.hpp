#pragma once
// OpenMP threads of the host kernels, settable from floors that do not see OpenMP.
#include "kernels/floor.hpp"

namespace tessera::kernels {

int host_threads();            // threads a host kernel's parallel loop uses
void set_host_threads(int n);  // n >= 1
int host_processors();         // processors this process may run on (its affinity mask)

}  // namespace tessera::kernels
