#pragma once
// The oneDNN float32 convolution behind conv_*_cpu: one CPU engine and stream per
// process, primitives cached by the full ConvDesc (thread-safe).
#include "kernels/floor.hpp"
#include <string>

#include "kernels/conv.hpp"

namespace tessera::kernels::dnnl_conv {

void forward(const ConvDesc& c, const float* x, const float* w, const float* bias, float* y);
void backward_data(const ConvDesc& c, const float* dy, const float* w, float* dx);
void backward_weights(const ConvDesc& c, const float* x, const float* dy, float* dw, float* dbias);

// What the cache holds for c: oneDNN's implementation names of the three passes and
// whether x goes through a dense staging copy (only when the strided x has no fast
// implementation). For benchmarks and reports.
struct Info {
  std::string forward, backward_data, backward_weights;
  bool stages_x = false, reorders_weights = false;
  bool channels_last = false;  // some pass reorders its activations to channels-last and back
  bool channels_last_forward = false;  // the forward does
};
Info info(const ConvDesc& c);

}  // namespace tessera::kernels::dnnl_conv
