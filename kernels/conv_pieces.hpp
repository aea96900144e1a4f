#pragma once
// The piecewise path of the convolution entry points (kernels/conv.hpp): a call whose
// tensors exceed conv_call_limit runs as several backend calls. Internal to kernels/.
#include "kernels/floor.hpp"
#include "kernels/conv.hpp"

namespace tessera::kernels {

// One backend call, no splitting (conv_entry.cpp).
namespace backend {
void conv_forward(const Device& dev, const ConvDesc&, const void* x, const void* w,
                  const void* bias, void* y);
void conv_backward_data(const Device& dev, const ConvDesc&, const void* dy, const void* w,
                        void* dx);
void conv_backward_weights(const Device& dev, const ConvDesc&, const void* x, const void* dy,
                           void* dw, void* dbias);
}  // namespace backend

// Whether every tensor of desc is within conv_call_limit(dev) (an invalid desc "fits":
// the backend names its fault).
bool conv_fits_one_call(const Device& dev, const ConvDesc& desc);

void conv_forward_in_pieces(const Device& dev, const ConvDesc& desc, const void* x, const void* w,
                            const void* bias, void* y);
void conv_backward_data_in_pieces(const Device& dev, const ConvDesc& desc, const void* dy,
                                  const void* w, void* dx);
void conv_backward_weights_in_pieces(const Device& dev, const ConvDesc& desc, const void* x,
                                     const void* dy, void* dw, void* dbias);

}  // namespace tessera::kernels
