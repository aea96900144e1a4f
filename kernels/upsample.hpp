#pragma once
// Nearest and (bi/tri)linear upsampling by integer factors per spatial dim, PyTorch
// semantics (nearest: src = floor(dst / scale); linear, align_corners=false:
// src = max((dst + 0.5) / scale - 0.5, 0); linear, align_corners=true:
// src = dst (G - 1) / (G scale - 1) over a global input extent G; the upper neighbour is
// clamped to the global edge). Source positions are exact rationals (PyTorch rounds them
// in the input's precision).
//
// It works on windows, so a sharded layer can run it on its shard: the descriptor holds
// the global input extent, the global origin and extent of the input window the x pointer
// holds (in_lo, in_n; read through element strides) and of the output window to produce
// (out_lo, out_n). A window that lacks an input cell the output window needs is an error;
// upsample_input_range says which input cells an output window needs, to size halos.
#include "kernels/floor.hpp"
#include "kernels/device/device.hpp"
#include "decomp/box.hpp"
#include "decomp/host_device.hpp"
#include "decomp/dtype.hpp"

namespace tessera::kernels {

enum class UpsampleMode { Nearest, Linear, LinearAlignCorners };

struct UpsampleDesc {
  int nd = 1;  // spatial dims, 1..3
  DType type = DType::f32;
  Index n = 1, c = 1;
  UpsampleMode mode = UpsampleMode::Nearest;
  Index scale[3] = {1, 1, 1};
  Index in_global[3] = {1, 1, 1};  // global input extent; the global output is scale times it
  Index in_lo[3] = {0, 0, 0}, in_n[3] = {1, 1, 1};    // input window held by x / dx
  Index out_lo[3] = {0, 0, 0}, out_n[3] = {1, 1, 1};  // output window of y / dy
  // Element strides of x (and dx) over (n, c, spatial...); all zero = contiguous.
  Index x_strides[5] = {0, 0, 0, 0, 0};
};

// The two input cells output cell o (global) reads in one dim, and the weight of i1:
// value = (1 - w1) * x[i0] + w1 * x[i1]. Exact integer arithmetic for the indices.
struct UpsampleTap {
  Index i0, i1;
  double w1;
};
TESSERA_HD inline UpsampleTap upsample_tap(UpsampleMode m, Index scale, Index in_global, Index o) {
  if (m == UpsampleMode::Nearest) return {o / scale, o / scale, 0.0};
  if (m == UpsampleMode::LinearAlignCorners) {
    // src = o (G - 1) / (G scale - 1): the corner cells' centres meet; one output cell reads 0.
    const Index den = in_global * scale - 1;
    if (den <= 0) return {0, 0, 0.0};
    const Index num = o * (in_global - 1);
    const Index i0 = num / den;
    const Index i1 = i0 + 1 < in_global ? i0 + 1 : in_global - 1;
    return {i0, i1, static_cast<double>(num % den) / static_cast<double>(den)};
  }
  // src = (o + 0.5) / scale - 0.5 = (2o + 1 - scale) / (2 scale), clamped at 0.
  Index num = 2 * o + 1 - scale;
  if (num < 0) num = 0;
  const Index i0 = num / (2 * scale);
  const Index i1 = i0 + 1 < in_global ? i0 + 1 : in_global - 1;
  return {i0, i1, static_cast<double>(num % (2 * scale)) / static_cast<double>(2 * scale)};
}

// Input cells [*lo, *hi) of one dim that output cells [out_lo, out_lo + out_n) read
// (both taps of linear, even where a weight is zero). Empty for out_n <= 0.
TESSERA_HD inline void upsample_input_range(UpsampleMode m, Index scale, Index in_global,
                                            Index out_lo, Index out_n, Index* lo, Index* hi) {
  if (out_n <= 0) {
    *lo = *hi = 0;
    return;
  }
  *lo = upsample_tap(m, scale, in_global, out_lo).i0;
  *hi = upsample_tap(m, scale, in_global, out_lo + out_n - 1).i1 + 1;
}

// y (contiguous, (n, c, out_n...)) = the output window of upsample(x).
void upsample_forward(const Device& dev, const UpsampleDesc& d, const void* x, void* y);
// dx (the input window, x's strides; overwritten) = adjoint of the output window's
// upsampling applied to dy: each dx cell gets the sum over the cells of the dy window
// that read it, weighted; cells no output of the window reads get 0. Summing the dx of
// all windows of a partition of the output (the halo adjoint exchange) gives the full dx.
void upsample_backward(const Device& dev, const UpsampleDesc& d, const void* dy, void* dx);

// The backends behind the entry points above (the entry dispatches on dev.space):
// host loops, oneDNN, OpenMP ...
namespace cpu {
void upsample_forward(const UpsampleDesc& d, const void* x, void* y);
void upsample_backward(const UpsampleDesc& d, const void* dy, void* dx);
}  // namespace cpu
// ... and CUDA, defined only where Tessera is built with CUDA (kCudaEnabled): every pointer
// is a device pointer, work is queued on dev.stream, and a result returned to the host (a
// sum) is waited for.
namespace cuda {
void upsample_forward(const Device& dev, const UpsampleDesc& d, const void* x, void* y);
void upsample_backward(const Device& dev, const UpsampleDesc& d, const void* dy, void* dx);
}  // namespace cuda

}  // namespace tessera::kernels
