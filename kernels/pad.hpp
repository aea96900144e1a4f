#pragma once
// Padding of the 1-3 spatial dims of an (N, C, spatial...) tensor, PyTorch's F.pad modes:
// constant (a value), reflect (the cells mirrored about the edge cell, which is not
// repeated; padding narrower than the extent), replicate (the edge cell repeated) and
// circular (the other end's cells: periodic). Negative widths crop, as in F.pad.
//
// Circular padding reads its input in unwrapped coordinates: output o copies cell o - pad_lo,
// which lies below 0 or past the extent in the padding; the caller's window holds those
// cells as periodic ghosts (a halo exchange wraps them), so a kernel never wraps itself.
//
// It works on windows, as upsampling does, so a sharded layer can run it on its shard: the
// descriptor holds the global input extent and padding, the global origin and extent of the
// input window x holds (in_lo, in_n; read through element strides) and of the output window
// to produce (out_lo, out_n; global output coordinates, which start at the left padding).
// pad_input_range says which input cells an output window reads, to size halos.
#include "kernels/floor.hpp"
#include "kernels/device/device.hpp"
#include "decomp/box.hpp"
#include "decomp/host_device.hpp"
#include "decomp/dtype.hpp"

namespace tessera::kernels {

enum class PadMode { Constant, Reflect, Replicate, Circular };

// pad_source's answer for an output cell that holds the constant.
inline constexpr Index kPadConstant = -(Index{1} << 62);

struct PadDesc {
  int nd = 1;  // spatial dims, 1..3
  DType type = DType::f32;
  Index n = 1, c = 1;
  PadMode mode = PadMode::Constant;
  double value = 0.0;  // constant mode
  Index in_global[3] = {1, 1, 1};
  Index pad_lo[3] = {0, 0, 0}, pad_hi[3] = {0, 0, 0};
  Index in_lo[3] = {0, 0, 0}, in_n[3] = {1, 1, 1};    // input window held by x / dx
  Index out_lo[3] = {0, 0, 0}, out_n[3] = {1, 1, 1};  // output window of y / dy
  // Element strides of x (and dx) over (n, c, spatial...); all zero = contiguous.
  Index x_strides[5] = {0, 0, 0, 0, 0};
};

// The input cell (global; unwrapped for circular) output cell o (global) copies in one dim,
// or kPadConstant where it holds the constant.
TESSERA_HD inline Index pad_source(PadMode m, Index L, Index plo, Index o) {
  const Index i = o - plo;
  if ((i >= 0 && i < L) || m == PadMode::Circular) return i;
  if (m == PadMode::Constant) return kPadConstant;
  if (m == PadMode::Replicate) return i < 0 ? 0 : L - 1;
  return i < 0 ? -i : 2 * (L - 1) - i;  // reflect (padding < L keeps it inside)
}

// Up to three runs of outputs [lo, hi) (global) that copy input cell p (global; unwrapped
// for circular, whose copies are the window's periodic ghosts: each copies only itself) in
// one dim: itself, and the padding that mirrors or repeats it. Returns the number of runs;
// runs may be empty or reach outside the output where a negative width crops.
TESSERA_HD inline int pad_readers(PadMode m, Index L, Index plo, Index phi, Index p, Index lo[3],
                                  Index hi[3]) {
  int n = 0;
  const Index self = p + plo;
  if (m == PadMode::Replicate && (p == 0 || p == L - 1)) {
    // The edge cell and the padding beside it: one run (both sides where L == 1).
    lo[n] = p == 0 ? 0 : self;
    hi[n++] = p == L - 1 ? plo + L + phi : self + 1;
    return n;
  }
  lo[n] = self;
  hi[n++] = self + 1;
  if (m == PadMode::Reflect) {
    if (p >= 1 && p <= plo) {  // mirrored into the left padding
      lo[n] = plo - p;
      hi[n] = lo[n] + 1;
      ++n;
    }
    if (p <= L - 2 && p >= L - 1 - phi) {  // and into the right padding
      lo[n] = plo + 2 * (L - 1) - p;
      hi[n] = lo[n] + 1;
      ++n;
    }
  }
  return n;
}

// Input cells [*lo, *hi) of one dim that output cells [out_lo, out_lo + out_n) read (a
// superset where the reads are not contiguous; unwrapped for circular). Empty where they
// read none (constant).
void pad_input_range(PadMode m, Index L, Index plo, Index out_lo, Index out_n, Index* lo,
                     Index* hi);

// y (contiguous, (n, c, out_n...)) = the output window of pad(x).
void pad_forward(const Device& dev, const PadDesc& d, const void* x, void* y);
// dx (the input window, x's strides; overwritten) = adjoint of the output window's padding
// applied to dy: each dx cell gets the sum of the dy cells of the window that copy it.
// Summing the dx of all windows of a partition of the output gives the full dx.
void pad_backward(const Device& dev, const PadDesc& d, const void* dy, void* dx);

// The backends behind the entry points above (the entry dispatches on dev.space): host loops
// with OpenMP ...
namespace cpu {
void pad_forward(const PadDesc& d, const void* x, void* y);
void pad_backward(const PadDesc& d, const void* dy, void* dx);
}  // namespace cpu
// ... and CUDA, defined only where Tessera is built with CUDA (kCudaEnabled): every pointer
// is a device pointer, work is queued on dev.stream.
namespace cuda {
void pad_forward(const Device& dev, const PadDesc& d, const void* x, void* y);
void pad_backward(const Device& dev, const PadDesc& d, const void* dy, void* dx);
}  // namespace cuda

}  // namespace tessera::kernels
