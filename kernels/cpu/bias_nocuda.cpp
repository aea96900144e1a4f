// CUDA entry points of kernels/bias.hpp for builds without CUDA.
#include "decomp/error.hpp"
#include "kernels/bias.hpp"

namespace tessera::kernels {

void bias_add_cuda(DType, Index, Index, Index, void*, const void*) {
  throw Error("bias_add_cuda: Tessera was built without CUDA (TESSERA_CUDA=OFF)");
}
void bias_backward_cuda(DType, Index, Index, Index, const void*, void*) {
  throw Error("bias_backward_cuda: Tessera was built without CUDA (TESSERA_CUDA=OFF)");
}

}  // namespace tessera::kernels
