// CUDA entry points of kernels/upsample.hpp for builds without CUDA.
#include "decomp/error.hpp"
#include "kernels/upsample.hpp"

namespace tessera::kernels {

void upsample_forward_cuda(const UpsampleDesc&, const void*, void*) {
  throw Error("upsample_forward_cuda: Tessera was built without CUDA (TESSERA_CUDA=OFF)");
}
void upsample_backward_cuda(const UpsampleDesc&, const void*, void*) {
  throw Error("upsample_backward_cuda: Tessera was built without CUDA (TESSERA_CUDA=OFF)");
}

}  // namespace tessera::kernels
