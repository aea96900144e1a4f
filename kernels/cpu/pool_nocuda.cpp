// CUDA entry points of kernels/pool.hpp for builds without CUDA.
#include "decomp/error.hpp"
#include "kernels/pool.hpp"

namespace tessera::kernels {

void pool_forward_cuda(const PoolDesc&, const void*, void*) {
  throw Error("pool_forward_cuda: Tessera was built without CUDA (TESSERA_CUDA=OFF)");
}
void pool_backward_cuda(const PoolDesc&, const void*, const void*, void*) {
  throw Error("pool_backward_cuda: Tessera was built without CUDA (TESSERA_CUDA=OFF)");
}

}  // namespace tessera::kernels
