#pragma once
// Pieces the sharded conv and transposed-conv layers share: option validation and
// expansion, input checks, the local kernel descriptor of a strided window, host/CUDA
// dispatch of the local kernels, parameter initialisation and gradient accumulation.
#include "runtime/floor.hpp"
#include <functional>
#include <string>
#include <vector>

#include "kernels/conv.hpp"
#include "runtime/nn/layer.hpp"
#include "runtime/nn/window_layout.hpp"

namespace tessera::conv_support {

// v with one entry per spatial dim (a single entry is repeated); throws naming `what`.
std::vector<Index> per_dim(const std::vector<Index>& v, int nd, const char* what,
                           const char* layer);

// Throws unless 1 <= nd <= 3, channels and groups are positive and groups divide both
// channel counts.
void check_shape_options(int nd, Index in_channels, Index out_channels, Index groups,
                         const char* layer);

// The window options, one entry per spatial dim.
struct WindowArgs {
  std::vector<Index> kernel, stride, dilation, pad_lo, pad_hi;
};
// padding_hi empty: the same as padding.
WindowArgs window_args(const std::vector<Index>& kernel, const std::vector<Index>& stride,
                       const std::vector<Index>& dilation, const std::vector<Index>& padding,
                       const std::vector<Index>& padding_hi, int nd, const char* layer);
// One validated WindowDim per dim; `check(d, w)` adds the layer's own conditions, in the
// same pass so the first bad dim is the one reported.
std::vector<WindowDim> window_dims(const WindowArgs& a, const char* layer,
                                   const std::function<void(int, const WindowDim&)>& check);

// The halo reach of (N, C, spatial...): none along batch and channels, the windows' along
// the spatial dims (wrapping around when `periodic`).
std::vector<HaloReach> spatial_reach(const std::vector<WindowDim>& win, bool periodic);
// One step of a direct convolution from conv_in to conv_out (a transposed conv passes the
// conv it transposes: its output as conv_in, its input as conv_out), counted three times
// (forward, backward data, backward weights), plus the halo of conv_in's exchanges.
OpCost direct_conv_cost(const ShardSpec& conv_in, const ShardSpec& conv_out,
                        const std::vector<WindowDim>& win, Index in_per_group, Index weights,
                        bool periodic, DType dtype);

// "AxBxC"
std::string dims_str(const std::vector<Index>& v);
// "kernel .., stride .., dilation .., padding lo/hi" of the windows, for a layer's name().
std::string windows_str(const std::vector<WindowDim>& win);

// Throws unless `in` is (N, in_channels, nd spatial dims) with a replicated channel dim
// and no pending Partial sums.
void check_input_spec(const ShardSpec& in, int nd, Index in_channels, const std::string& who);
// Throws unless x holds `dtype` in `space` memory.
void check_input(const ShardTensor& x, DType dtype, MemSpace space, const std::string& who);
// Throws unless dy has the spec of the output it is the gradient of, `dtype` and `space`.
void check_grad(const ShardTensor& dy, const ShardSpec& out, DType dtype, MemSpace space,
                const std::string& who);

// The local conv of a block's window (C_in, C_out as the kernel sees them), before the
// window's sizes and strides are set (set_x_window); zero padding is the block's clipping.
kernels::ConvDesc local_desc(int nd, DType t, Index c_in, Index c_out, Index groups,
                             const std::vector<WindowDim>& win, const BlockWindow& bw,
                             const char* layer);

// desc.n, desc.in and desc.x_strides from a (N, C, spatial...) window into a larger buffer.
void set_x_window(kernels::ConvDesc& desc, const Tensor& window);

// y (N, C, inner...) contiguous: y[n, c, ...] += b[c]; db[c] = sum of dy over n and inner.
void bias_add(DType t, const Tensor& y, const Tensor& b);
void bias_grad(DType t, const Tensor& dy, const Tensor& db);

// PyTorch's default init: weight and bias from U(-1/sqrt(fan_in), 1/sqrt(fan_in)), drawn in
// float64 from one seeded generator, so every rank holds the same values.
void init_uniform(Parameter& weight, Parameter* bias, Index fan_in, unsigned seed);
Parameter make_param(const std::string& name, const std::vector<Index>& shape, DType t, MemSpace s);
// weight (c0, c1, kernel...) and, if `bias`, bias (c_bias), both from init_uniform with
// fan_in = c1 * prod(kernel).
void make_params(Parameter& weight, Parameter* bias, Index c0, Index c1, Index c_bias,
                 const std::vector<WindowDim>& win, DType t, MemSpace s, unsigned seed);

// p.grad += local (this rank's contribution, in p.grad's dtype and memory space), and
// p.grad_axes := the mesh axes that shard `spec`, over which GradSync sums it.
void accumulate_grad(Parameter& p, const Tensor& local, const ShardSpec& spec);

}  // namespace tessera::conv_support
