#pragma once
// The one CUDA error check: TESSERA_CUDA_CHECK(call) throws tessera::Error naming the call,
// the file and line, and CUDA's message. Host code only (cuda_runtime_api.h, no nvcc needed).
#include "kernels/floor.hpp"
#include <cuda_runtime_api.h>

namespace tessera::kernels {

[[noreturn]] void throw_cuda_error(cudaError_t e, const char* call, const char* file, int line);

}  // namespace tessera::kernels

#define TESSERA_CUDA_CHECK(call)                                                         \
  do {                                                                                   \
    const cudaError_t tessera_cuda_rc_ = (call);                                         \
    if (tessera_cuda_rc_ != cudaSuccess)                                                 \
      ::tessera::kernels::throw_cuda_error(tessera_cuda_rc_, #call, __FILE__, __LINE__); \
  } while (0)
