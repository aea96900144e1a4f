#pragma once
// Shared pieces of the sharded pooling, upsampling, normalization and pointwise layers:
// the kernels' element type for a tensor, the mesh axes a spec shards, sums over those
// axes, and the accumulation of local parameter gradients.
#include "runtime/floor.hpp"
#include <random>
#include <string>
#include <vector>

#include "decomp/dtype.hpp"
#include "runtime/nn/layer.hpp"

namespace tessera {

// float32 / float64 as the kernels' DType; anything else throws naming `where`.
DType kernel_scalar(DType dt, const char* where);

// Mesh axes that shard at least one of `dims`, ascending (sharding_axes(spec) in
// runtime/window_layout.hpp gives those of every dim).
std::vector<int> axes_sharding_dims(const ShardSpec& spec, const std::vector<int>& dims);
// The spatial (token) dims 2 .. ndim-1 of an (N, C, spatial...) tensor.
std::vector<int> token_dims(int ndim);

// In-place sum of n doubles over every rank that differs only in `axes` (one all-reduce
// per axis, so the result is the same on every rank of the group).
void allreduce_sum(const Mesh& mesh, const std::vector<int>& axes, double* buf, Index n);

// Adds `local` (this rank's contribution to the flat elements [offset, offset + n) of
// p.grad: n values in p.grad's memory space, float64 or p.grad's dtype) into p.grad where
// it lives, and declares p.grad_axes = axes (GradSync sums over them).
void add_param_grad(const std::vector<int>& axes, const Tensor& local, Index offset, Parameter& p);

// A parameter of `shape` filled with `fill` (grad zero) in dtype and space.
Parameter make_param(const std::string& name, const std::vector<Index>& shape, double fill,
                     DType dt, MemSpace space);

// Fills t (any memory space) with U(-bound, bound) draws of rng, in element order.
void fill_uniform(const Tensor& t, std::mt19937_64& rng, double bound);

// A parameter's values as float64 on the host (for layers that use them in host code).
std::vector<double> param_values(const Parameter& p);

// The spec with dim 1 (channels) of extent c, every other dim's placement and sizes kept:
// a token-wise layer's output, or a slice of its input's channels.
ShardSpec with_channels(const ShardSpec& in, Index c);

// Checks a layer input: no Partial axes, float32 or float64, rank in [min_nd, max_nd].
// Refuses a shard with ghost room (a strided local()) where a layer reads a contiguous buffer;
// `what` names it in the message ("input", "output gradient").
void check_without_room(const ShardTensor& t, const std::string& where, const char* what);
// takes_room: the layer reads inputs with ghost room (window layers through fill_halo).
void check_layer_input(const ShardTensor& x, int min_nd, int max_nd, const std::string& where,
                       bool takes_room = false);

// Checks a layer's input spec: (N, C, nd spatial dims), no Partial axes.
void check_spatial_spec(const ShardSpec& in, int nd, const std::string& where);

// Checks an output gradient against the forward's output spec and input dtype and space.
void check_output_grad(const ShardTensor& dy, const ShardSpec& out, DType dt, MemSpace space,
                       const std::string& where);

}  // namespace tessera
