#pragma once
// Pieces the sharded conv and transposed-conv layers share: option expansion, the local
// kernel descriptor of a strided window, host/CUDA dispatch of the local kernels, parameter
// initialisation and gradient accumulation.
#include <vector>

#include "kernels/conv.hpp"
#include "runtime/layer.hpp"

namespace tessera::conv_support {

// v with one entry per spatial dim (a single entry is repeated); throws naming `what`.
std::vector<Index> per_dim(const std::vector<Index>& v, int nd, const char* what,
                           const char* layer);
kernels::Scalar scalar_of(DType t, const char* layer);

// desc.n, desc.in and desc.x_strides from a (N, C, spatial...) window into a larger buffer.
void set_x_window(kernels::ConvDesc& desc, const Tensor& window);

void forward(MemSpace s, const kernels::ConvDesc& d, const void* x, const void* w, const void* bias,
             void* y);
void backward_data(MemSpace s, const kernels::ConvDesc& d, const void* dy, const void* w, void* dx);
void backward_weights(MemSpace s, const kernels::ConvDesc& d, const void* x, const void* dy,
                      void* dw, void* dbias);
// y (N, C, inner...) contiguous: y[n, c, ...] += b[c]; db[c] = sum of dy over n and inner.
void bias_add(MemSpace s, kernels::Scalar t, const Tensor& y, const Tensor& b);
void bias_grad(MemSpace s, kernels::Scalar t, const Tensor& dy, const Tensor& db);

// PyTorch's default init: weight and bias from U(-1/sqrt(fan_in), 1/sqrt(fan_in)), drawn in
// float64 from one seeded generator, so every rank holds the same values.
void init_uniform(Parameter& weight, Parameter* bias, Index fan_in, unsigned seed);
Parameter make_param(const std::string& name, const std::vector<Index>& shape, DType t, MemSpace s);

// p.grad += local, after summing local over the mesh axes that shard `spec` if `reduce`.
void accumulate_grad(Parameter& p, const Tensor& local, const Mesh& mesh, const ShardSpec& spec,
                     bool reduce);

}  // namespace tessera::conv_support
