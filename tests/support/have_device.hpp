#pragma once
// GPU tests skip, saying so on rank 0, where no CUDA device is visible (the CI machine
// builds the CUDA code but has no GPU).
#include <iostream>

#include "kernels/device/device.hpp"
#include "tests/harness/mpi_test.hpp"

namespace tessera::test {

inline bool have_device() {
  const bool yes = device::count() > 0;
  if (!yes && world_rank() == 0)
    std::cout << "SKIPPED: no CUDA device visible (built with CUDA: "
              << (device::built_with_cuda() ? "yes" : "no") << ")" << std::endl;
  return yes;
}

}  // namespace tessera::test
