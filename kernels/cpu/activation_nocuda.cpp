// CUDA entry points of kernels/activation.hpp for builds without CUDA.
#include "decomp/error.hpp"
#include "kernels/activation.hpp"

namespace tessera::kernels {

void activation_forward_cuda(Activation, DType, Index, const void*, void*) {
  throw Error("activation_forward_cuda: Tessera was built without CUDA (TESSERA_CUDA=OFF)");
}
void activation_backward_cuda(Activation, DType, Index, const void*, const void*, void*) {
  throw Error("activation_backward_cuda: Tessera was built without CUDA (TESSERA_CUDA=OFF)");
}

}  // namespace tessera::kernels
