// Validation and normalization of upsampling descriptors (host side of every backend).
#include "decomp/error.hpp"
#include "kernels/upsample_impl.hpp"

namespace tessera::kernels {

UpsampleGeom upsample_geometry(const UpsampleDesc& d, const char* where) {
  check_nd_nc(d.nd, d.n, d.c, where, "upsampling");
  UpsampleGeom g;
  g.n = d.n;
  g.c = d.c;
  g.mode = d.mode;
  const int off = 3 - d.nd;
  for (int k = 0; k < d.nd; ++k) {
    TESSERA_CHECK(d.scale[k] >= 1 && d.in_global[k] >= 1 && d.in_n[k] >= 0 && d.out_n[k] >= 0,
                  where << ": dim " << k << " needs scale >= 1, global extent >= 1 and window "
                        << "extents >= 0 (scale " << d.scale[k] << ", global " << d.in_global[k]
                        << ", in_n " << d.in_n[k] << ", out_n " << d.out_n[k] << ")");
    Index lo, hi;
    upsample_input_range(d.mode, d.scale[k], d.in_global[k], d.out_lo[k], d.out_n[k], &lo, &hi);
    check_output_window(where, k, d.out_lo[k], d.out_n[k], d.in_global[k] * d.scale[k], lo, hi,
                        d.in_lo[k], d.in_n[k]);
    const int n = off + k;
    g.s[n] = d.scale[k];
    g.g[n] = d.in_global[k];
    g.set_windows(n, d.in_lo[k], d.in_n[k], d.out_lo[k], d.out_n[k]);
  }
  normalized_x_strides(d.x_strides, d.nd, g.c, g.in, g.xs);
  return g;
}

void upsample_forward(const Device& dev, const UpsampleDesc& d, const void* x, void* y) {
  if (dev.is_host()) return cpu::upsample_forward(d, x, y);
  if constexpr (kCudaEnabled) return cuda::upsample_forward(dev, d, x, y);
  throw_without_cuda("upsample_forward");
}

void upsample_backward(const Device& dev, const UpsampleDesc& d, const void* dy, void* dx) {
  if (dev.is_host()) return cpu::upsample_backward(d, dy, dx);
  if constexpr (kCudaEnabled) return cuda::upsample_backward(dev, d, dy, dx);
  throw_without_cuda("upsample_backward");
}

}  // namespace tessera::kernels
