#pragma once
// Direct-loop convolution on host memory (OpenMP over output planes, contiguous inner
// loops): the float64 path, since oneDNN has no f64 convolution on the CPU. Templated
// so it runs float32 too (a second opinion in tests, a fallback for oneDNN).
#include "kernels/floor.hpp"
#include "kernels/conv.hpp"

namespace tessera::kernels::direct {

template <class T>
void forward(const ConvDesc& c, const T* x, const T* w, const T* bias, T* y);
template <class T>
void backward_data(const ConvDesc& c, const T* dy, const T* w, T* dx);
template <class T>
void backward_weights(const ConvDesc& c, const T* x, const T* dy, T* dw, T* dbias);

}  // namespace tessera::kernels::direct
