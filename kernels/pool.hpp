#pragma once
// Max and average pooling over 1-3 spatial dims of an (N, C, spatial...) tensor, forward
// and backward, on a window of a possibly halo-padded buffer: x is read through element
// strides and the padding is explicit per side (a sharded layer passes zero padding on
// the sides where its halo holds real neighbour cells). Any kernel, stride and padding;
// max pooling also any dilation (a window's cells dilation apart, as PyTorch's).
//
// Max pooling treats padding as -inf (it never wins: every window must hold a real cell);
// ties go to the first cell of the window in row-major order, and the backward recomputes
// that argmax from x, so no index tensor is kept between forward and backward. Average pooling
// divides by the kernel volume (count_include_pad) or by the number of real cells in the window;
// the last `uncounted_hi` cells of the right padding (PyTorch's ceil_mode overhang) are never
// counted, so a window reaching into them divides by its part inside the counted padding.
#include "kernels/floor.hpp"
#include "kernels/device/device.hpp"
#include "decomp/box.hpp"
#include "decomp/host_device.hpp"
#include "decomp/dtype.hpp"

namespace tessera::kernels {

enum class PoolKind { Max, Avg };

struct PoolDesc {
  int nd = 1;  // spatial dims, 1..3
  DType type = DType::f32;
  Index n = 1, c = 1;
  Index in[3] = {1, 1, 1};  // spatial extent of the x window
  Index kernel[3] = {1, 1, 1};
  Index stride[3] = {1, 1, 1};
  Index dilation[3] = {1, 1, 1};  // max pooling only
  Index pad_lo[3] = {0, 0, 0}, pad_hi[3] = {0, 0, 0};
  Index uncounted_hi[3] = {0, 0, 0};  // of pad_hi: ceil-mode overhang (0 <= it <= pad_hi)
  // Element strides of x (and dx) over (n, c, spatial...); all zero = contiguous.
  Index x_strides[5] = {0, 0, 0, 0, 0};
  PoolKind kind = PoolKind::Max;
  bool count_include_pad = true;

  // Cells one window spans in dim d.
  TESSERA_HD Index span(int d) const { return dilation[d] * (kernel[d] - 1) + 1; }
  // Output extent of spatial dim d (floor mode over the given padding).
  TESSERA_HD Index out(int d) const {
    return (in[d] + pad_lo[d] + pad_hi[d] - span(d)) / stride[d] + 1;
  }
};

// The real cells of a window starting at `start` (input coordinates; below 0 in the left
// padding) with `kernel` cells `dilation` apart over an input of extent L: lo, lo + dilation,
// ... below hi; none where lo >= hi.
TESSERA_HD inline void pool_window_cells(Index start, Index kernel, Index dilation, Index L,
                                         Index& lo, Index& hi) {
  lo = start >= 0 ? start : start + (-start + dilation - 1) / dilation * dilation;
  const Index end = start + dilation * (kernel - 1) + 1;
  hi = end < L ? end : L;
}
// The first of `out` windows (stride apart from -pad_lo) that holds no real cell, or -1. Only
// windows starting in the left padding and the last can miss one.
inline Index pool_empty_window(Index L, Index kernel, Index stride, Index dilation, Index pad_lo,
                               Index out) {
  for (Index o = 0; o < out; ++o) {
    const Index start = o * stride - pad_lo;
    if (start >= 0 && o + 1 < out) continue;
    Index lo = 0, hi = 0;
    pool_window_cells(start, kernel, dilation, L, lo, hi);
    if (lo >= hi) return o;
  }
  return -1;
}

// y (contiguous, (n, c, out...)) = pool(x).
void pool_forward(const Device& dev, const PoolDesc& d, const void* x, void* y);
// dx (x's layout and strides; the window is overwritten) = adjoint of pooling applied to
// dy (contiguous). x is read only for max pooling (nullptr allowed for average pooling).
void pool_backward(const Device& dev, const PoolDesc& d, const void* x, const void* dy, void* dx);

// The backends behind the entry points above (the entry dispatches on dev.space):
// host loops, oneDNN, OpenMP ...
namespace cpu {
void pool_forward(const PoolDesc& d, const void* x, void* y);
void pool_backward(const PoolDesc& d, const void* x, const void* dy, void* dx);
}  // namespace cpu
// ... and CUDA, defined only where Tessera is built with CUDA (kCudaEnabled): every pointer
// is a device pointer, work is queued on dev.stream, and a result returned to the host (a
// sum) is waited for.
namespace cuda {
void pool_forward(const Device& dev, const PoolDesc& d, const void* x, void* y);
void pool_backward(const Device& dev, const PoolDesc& d, const void* x, const void* dy, void* dx);
}  // namespace cuda

}  // namespace tessera::kernels
