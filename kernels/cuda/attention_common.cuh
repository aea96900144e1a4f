#pragma once
// What both CUDA attentions share (kernels/cuda/attention.cu through cuBLAS,
// kernels/cuda/attention_fused.cu in one kernel per pass): conversions between the storage
// types and double, the accumulation type of each storage type, warp reductions, the causal
// rule, and the row sums D_i = rowsum(dO o O) of the backward.
#include <cuda_bf16.h>

#include <cmath>

#include "decomp/index.hpp"

namespace tessera::kernels::attention_cuda {

// The type scores and accumulations are kept in: float for float32 and bf16, double for
// float64.
template <class T>
struct AccOf {
  using type = float;
};
template <>
struct AccOf<double> {
  using type = double;
};

__device__ inline double to_d(float x) {
  return x;
}
__device__ inline double to_d(double x) {
  return x;
}
__device__ inline double to_d(__nv_bfloat16 x) {
  return __bfloat162float(x);
}
template <class T>
__device__ inline T from_d(double x) {
  return static_cast<T>(x);
}
template <>
__device__ inline __nv_bfloat16 from_d<__nv_bfloat16>(double x) {
  return __double2bfloat16(x);
}

template <class X>
__device__ inline X warp_max(X x) {
  for (int o = 16; o > 0; o /= 2) x = fmax(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}
template <class X>
__device__ inline X warp_sum(X x) {
  for (int o = 16; o > 0; o /= 2) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

// Key j hidden from query i (rows of the blocks; the offsets are their global positions).
__device__ inline bool causal_hidden(bool causal, Index q_offset, Index k_offset, Index i,
                                     Index j) {
  return causal && j + k_offset > i + q_offset;
}

// The first row of this thread's warp and the stride of warp-per-row loops: the grids of
// cuda_blocks_for stop at 65535 blocks, so a warp takes every stride-th row (the loop's
// condition is the same across a warp: whole warps take part in its shuffles).
__device__ inline Index first_warp_row() {
  return (blockIdx.x * static_cast<Index>(blockDim.x) + threadIdx.x) / 32;
}
__device__ inline Index warp_row_stride() {
  return static_cast<Index>(gridDim.x) * blockDim.x / 32;
}

// The kernels below have internal linkage: each CUDA file that launches them holds its own.
namespace {

// D_i = rowsum(dO o O) of every row, in double: a warp per row.
template <class T>
__global__ void row_dots_kernel(Index rows, Index d, const T* a, const T* b, double* out) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  for (Index w = first_warp_row(); w < rows; w += warp_row_stride()) {
    double x = 0;
    for (Index e = lane; e < d; e += 32) x += to_d(a[w * d + e]) * to_d(b[w * d + e]);
    x = warp_sum(x);
    if (lane == 0) out[w] = x;
  }
}

template <class X>
__global__ void fill_kernel(X* x, Index n, X v) {
  for (Index i = blockIdx.x * static_cast<Index>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<Index>(gridDim.x) * blockDim.x)
    x[i] = v;
}

}  // namespace

}  // namespace tessera::kernels::attention_cuda
