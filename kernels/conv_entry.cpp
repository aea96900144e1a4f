// Entry points of kernels/conv.hpp: one per op, dispatched once on the device; a call
// past the backend's per-tensor limit goes to the piecewise path (conv_pieces.cpp).
#include "kernels/conv.hpp"
#include "kernels/conv_pieces.hpp"

namespace tessera::kernels {

void backend::conv_forward(const Device& dev, const ConvDesc& desc, const void* x, const void* w,
                           const void* bias, void* y) {
  if (dev.is_host()) return cpu::conv_forward(desc, x, w, bias, y);
  if constexpr (kCudaEnabled) return cuda::conv_forward(dev, desc, x, w, bias, y);
  throw_without_cuda("conv_forward");
}

void backend::conv_backward_data(const Device& dev, const ConvDesc& desc, const void* dy,
                                 const void* w, void* dx) {
  if (dev.is_host()) return cpu::conv_backward_data(desc, dy, w, dx);
  if constexpr (kCudaEnabled) return cuda::conv_backward_data(dev, desc, dy, w, dx);
  throw_without_cuda("conv_backward_data");
}

void backend::conv_backward_weights(const Device& dev, const ConvDesc& desc, const void* x,
                                    const void* dy, void* dw, void* dbias) {
  if (dev.is_host()) return cpu::conv_backward_weights(desc, x, dy, dw, dbias);
  if constexpr (kCudaEnabled) return cuda::conv_backward_weights(dev, desc, x, dy, dw, dbias);
  throw_without_cuda("conv_backward_weights");
}

void conv_forward(const Device& dev, const ConvDesc& desc, const void* x, const void* w,
                  const void* bias, void* y) {
  if (conv_fits_one_call(dev, desc)) return backend::conv_forward(dev, desc, x, w, bias, y);
  conv_forward_in_pieces(dev, desc, x, w, bias, y);
}

void conv_backward_data(const Device& dev, const ConvDesc& desc, const void* dy, const void* w,
                        void* dx) {
  if (conv_fits_one_call(dev, desc)) return backend::conv_backward_data(dev, desc, dy, w, dx);
  conv_backward_data_in_pieces(dev, desc, dy, w, dx);
}

void conv_backward_weights(const Device& dev, const ConvDesc& desc, const void* x, const void* dy,
                           void* dw, void* dbias) {
  if (conv_fits_one_call(dev, desc))
    return backend::conv_backward_weights(dev, desc, x, dy, dw, dbias);
  conv_backward_weights_in_pieces(dev, desc, x, dy, dw, dbias);
}

}  // namespace tessera::kernels
