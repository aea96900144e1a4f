#include "kernels/cuda/cuda_check.hpp"

#include <string>

#include "decomp/error.hpp"

namespace tessera::kernels {

void throw_cuda_error(cudaError_t e, const char* call, const char* file, int line) {
  throw Error(std::string("CUDA error in ") + call + " (" + file + ":" + std::to_string(line) +
              "): " + cudaGetErrorString(e));
}

}  // namespace tessera::kernels
