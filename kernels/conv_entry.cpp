// Entry points of kernels/conv.hpp: one per op, dispatched once on the device.
#include "kernels/conv.hpp"

namespace tessera::kernels {

void conv_forward(const Device& dev, const ConvDesc& desc, const void* x, const void* w,
                  const void* bias, void* y) {
  if (dev.is_host()) return cpu::conv_forward(desc, x, w, bias, y);
  if constexpr (kCudaEnabled) return cuda::conv_forward(dev, desc, x, w, bias, y);
  throw_without_cuda("conv_forward");
}

void conv_backward_data(const Device& dev, const ConvDesc& desc, const void* dy, const void* w,
                        void* dx) {
  if (dev.is_host()) return cpu::conv_backward_data(desc, dy, w, dx);
  if constexpr (kCudaEnabled) return cuda::conv_backward_data(dev, desc, dy, w, dx);
  throw_without_cuda("conv_backward_data");
}

void conv_backward_weights(const Device& dev, const ConvDesc& desc, const void* x, const void* dy,
                           void* dw, void* dbias) {
  if (dev.is_host()) return cpu::conv_backward_weights(desc, x, dy, dw, dbias);
  if constexpr (kCudaEnabled) return cuda::conv_backward_weights(dev, desc, x, dy, dw, dbias);
  throw_without_cuda("conv_backward_weights");
}

}  // namespace tessera::kernels
