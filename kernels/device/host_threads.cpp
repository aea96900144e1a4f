#include "kernels/device/host_threads.hpp"

#include <omp.h>

#include "decomp/error.hpp"

namespace tessera::kernels {

int host_threads() {
  return omp_get_max_threads();
}

void set_host_threads(int n) {
  TESSERA_CHECK(n >= 1, "set_host_threads: " << n << " threads");
  omp_set_num_threads(n);
}

int host_processors() {
  return omp_get_num_procs();
}

}  // namespace tessera::kernels
