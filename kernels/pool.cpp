// Validation and normalization of pooling descriptors (host side of every backend).
#include "decomp/error.hpp"
#include "kernels/pool_impl.hpp"

namespace tessera::kernels {

PoolGeom pool_geometry(const PoolDesc& d, const char* where) {
  check_nd_nc(d.nd, d.n, d.c, where, "pooling");
  PoolGeom g;
  g.n = d.n;
  g.c = d.c;
  g.max = d.kind == PoolKind::Max;
  g.include_pad = d.count_include_pad;
  const int off = 3 - d.nd;  // user dim k is normalized dim off + k
  for (int k = 0; k < d.nd; ++k) {
    TESSERA_CHECK(d.in[k] >= 1 && d.kernel[k] >= 1 && d.stride[k] >= 1 && d.dilation[k] >= 1 &&
                      d.pad_lo[k] >= 0 && d.pad_hi[k] >= 0,
                  where << ": dim " << k
                        << " needs extent, kernel, stride, dilation >= 1 and padding >= 0 (in "
                        << d.in[k] << ", kernel " << d.kernel[k] << ", stride " << d.stride[k]
                        << ", dilation " << d.dilation[k] << ", pad " << d.pad_lo[k] << "/"
                        << d.pad_hi[k] << ")");
    TESSERA_CHECK(d.dilation[k] == 1 || d.kind == PoolKind::Max,
                  where << ": dim " << k << ": dilation " << d.dilation[k]
                        << " needs max pooling (average pooling has none, as in PyTorch)");
    TESSERA_CHECK(d.uncounted_hi[k] >= 0 && d.uncounted_hi[k] <= d.pad_hi[k],
                  where << ": dim " << k << ": uncounted right padding " << d.uncounted_hi[k]
                        << " outside [0, " << d.pad_hi[k] << "]");
    TESSERA_CHECK(d.in[k] + d.pad_lo[k] + d.pad_hi[k] >= d.span(k),
                  where << ": dim " << k << ": window span " << d.span(k)
                        << " larger than the padded extent "
                        << d.in[k] + d.pad_lo[k] + d.pad_hi[k]);
    const Index out = d.out(k);
    const int n = off + k;
    g.in[n] = d.in[k];
    g.k[n] = d.kernel[k];
    g.s[n] = d.stride[k];
    g.dil[n] = d.dilation[k];
    g.plo[n] = d.pad_lo[k];
    g.out[n] = out;
    // Every window must hold a real cell (max: padding is -inf; avg: a count of zero;
    // dilation may step over a short input).
    const Index empty =
        pool_empty_window(d.in[k], d.kernel[k], d.stride[k], d.dilation[k], d.pad_lo[k], out);
    TESSERA_CHECK(empty < 0, where << ": dim " << k << ": pooling window " << empty
                                   << " holds no input cell (pad " << d.pad_lo[k] << "/"
                                   << d.pad_hi[k] << ", kernel " << d.kernel[k] << ", dilation "
                                   << d.dilation[k] << ")");
    g.end[n] = d.in[k] + d.pad_hi[k] - d.uncounted_hi[k];
  }
  normalized_x_strides(d.x_strides, d.nd, g.c, g.in, g.xs);
  return g;
}

void pool_forward(const Device& dev, const PoolDesc& d, const void* x, void* y) {
  if (dev.is_host()) return cpu::pool_forward(d, x, y);
  if constexpr (kCudaEnabled) return cuda::pool_forward(dev, d, x, y);
  throw_without_cuda("pool_forward");
}

void pool_backward(const Device& dev, const PoolDesc& d, const void* x, const void* dy, void* dx) {
  if (dev.is_host()) return cpu::pool_backward(d, x, dy, dx);
  if constexpr (kCudaEnabled) return cuda::pool_backward(dev, d, x, dy, dx);
  throw_without_cuda("pool_backward");
}

}  // namespace tessera::kernels
