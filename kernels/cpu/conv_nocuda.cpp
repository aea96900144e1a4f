// CUDA entry points of kernels/conv.hpp for builds without CUDA.
#include "decomp/error.hpp"
#include "kernels/conv.hpp"

namespace tessera::kernels {

void conv_forward_cuda(const ConvDesc&, const void*, const void*, const void*, void*) {
  throw Error("conv_forward_cuda: Tessera was built without CUDA (TESSERA_CUDA=OFF)");
}
void conv_backward_data_cuda(const ConvDesc&, const void*, const void*, void*) {
  throw Error("conv_backward_data_cuda: Tessera was built without CUDA (TESSERA_CUDA=OFF)");
}
void conv_backward_weights_cuda(const ConvDesc&, const void*, const void*, void*, void*) {
  throw Error("conv_backward_weights_cuda: Tessera was built without CUDA (TESSERA_CUDA=OFF)");
}

}  // namespace tessera::kernels
