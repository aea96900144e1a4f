// Validation and normalization of padding descriptors, the input ranges windows read, and
// the backend dispatch.
#include "decomp/error.hpp"
#include "kernels/pad_impl.hpp"

namespace tessera::kernels {

void pad_input_range(PadMode m, Index L, Index plo, Index out_lo, Index out_n, Index* lo,
                     Index* hi) {
  *lo = *hi = 0;
  if (out_n <= 0) return;
  const Index a = out_lo, b = out_lo + out_n - 1;  // first and last output
  if (m == PadMode::Circular) {                    // unwrapped: a plain shift
    *lo = a - plo;
    *hi = b - plo + 1;
    return;
  }
  if (m == PadMode::Constant) {  // the interior part only
    *lo = max_i(a - plo, 0);
    *hi = min_i(b - plo, L - 1) + 1;
    if (*hi <= *lo) *lo = *hi = 0;
    return;
  }
  // Replicate's source never decreases; reflect's falls, rises over the interior, falls:
  // its extremes lie at the window's ends or the interior's ends (sources 0 and L - 1).
  Index mn = L, mx = -1;
  for (Index o : {a, b, plo, plo + L - 1}) {
    if (o < a || o > b) continue;
    const Index s = pad_source(m, L, plo, o);
    mn = min_i(mn, s);
    mx = max_i(mx, s);
  }
  *lo = mn;
  *hi = mx + 1;
}

PadGeom pad_geometry(const PadDesc& d, const char* where) {
  check_nd_nc(d.nd, d.n, d.c, where, "padding");
  PadGeom g;
  g.n = d.n;
  g.c = d.c;
  g.mode = d.mode;
  g.value = d.value;
  const int off = 3 - d.nd;
  for (int k = 0; k < d.nd; ++k) {
    TESSERA_CHECK(d.in_global[k] >= 1 && d.in_global[k] + d.pad_lo[k] + d.pad_hi[k] >= 1 &&
                      d.in_n[k] >= 0 && d.out_n[k] >= 0,
                  where << ": dim " << k << " needs a global extent >= 1, padding that leaves "
                        << "a cell and window extents >= 0 (global " << d.in_global[k] << ", pad "
                        << d.pad_lo[k] << "/" << d.pad_hi[k] << ", in_n " << d.in_n[k] << ", out_n "
                        << d.out_n[k] << ")");
    TESSERA_CHECK(d.mode != PadMode::Reflect ||
                      (d.pad_lo[k] < d.in_global[k] && d.pad_hi[k] < d.in_global[k]),
                  where << ": dim " << k << ": reflect padding " << d.pad_lo[k] << "/"
                        << d.pad_hi[k] << " must be narrower than the extent " << d.in_global[k]);
    Index lo, hi;
    pad_input_range(d.mode, d.in_global[k], d.pad_lo[k], d.out_lo[k], d.out_n[k], &lo, &hi);
    check_output_window(where, k, d.out_lo[k], d.out_n[k],
                        d.in_global[k] + d.pad_lo[k] + d.pad_hi[k], lo, hi, d.in_lo[k], d.in_n[k]);
    const int n = off + k;
    g.g[n] = d.in_global[k];
    g.plo[n] = d.pad_lo[k];
    g.phi[n] = d.pad_hi[k];
    g.set_windows(n, d.in_lo[k], d.in_n[k], d.out_lo[k], d.out_n[k]);
  }
  normalized_x_strides(d.x_strides, d.nd, g.c, g.in, g.xs);
  return g;
}

void pad_forward(const Device& dev, const PadDesc& d, const void* x, void* y) {
  if (dev.is_host()) return cpu::pad_forward(d, x, y);
  if constexpr (kCudaEnabled) return cuda::pad_forward(dev, d, x, y);
  throw_without_cuda("pad_forward");
}

void pad_backward(const Device& dev, const PadDesc& d, const void* dy, void* dx) {
  if (dev.is_host()) return cpu::pad_backward(d, dy, dx);
  if constexpr (kCudaEnabled) return cuda::pad_backward(dev, d, dy, dx);
  throw_without_cuda("pad_backward");
}

}  // namespace tessera::kernels
