// Validation and normalization of upsampling descriptors (host side of every backend).
#include "kernels/check.hpp"
#include "kernels/upsample_impl.hpp"

namespace tessera::kernels {

UpsampleGeom upsample_geometry(const UpsampleDesc& d, const char* where) {
  TESSERA_CHECK(d.nd >= 1 && d.nd <= 3,
                where << ": upsampling needs 1 to 3 spatial dims, got " << d.nd);
  TESSERA_CHECK(d.n >= 0 && d.c >= 0, where << ": negative batch or channel count");
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
    const Index out_global = d.in_global[k] * d.scale[k];
    TESSERA_CHECK(d.out_lo[k] >= 0 && d.out_lo[k] + d.out_n[k] <= out_global,
                  where << ": dim " << k << ": output window [" << d.out_lo[k] << ", "
                        << d.out_lo[k] + d.out_n[k] << ") outside the global output [0, "
                        << out_global << ")");
    Index lo, hi;
    upsample_input_range(d.mode, d.scale[k], d.in_global[k], d.out_lo[k], d.out_n[k], &lo, &hi);
    TESSERA_CHECK(lo >= hi || (d.in_lo[k] <= lo && hi <= d.in_lo[k] + d.in_n[k]),
                  where << ": dim " << k << ": output window [" << d.out_lo[k] << ", "
                        << d.out_lo[k] + d.out_n[k] << ") needs input cells [" << lo << ", " << hi
                        << ") but the input window holds [" << d.in_lo[k] << ", "
                        << d.in_lo[k] + d.in_n[k] << ")");
    const int n = off + k;
    g.s[n] = d.scale[k];
    g.g[n] = d.in_global[k];
    g.ilo[n] = d.in_lo[k];
    g.in[n] = d.in_n[k];
    g.olo[n] = d.out_lo[k];
    g.on[n] = d.out_n[k];
  }
  bool contiguous = true;
  for (int k = 0; k < 2 + d.nd; ++k) contiguous = contiguous && d.x_strides[k] == 0;
  if (contiguous) {
    g.xs[4] = 1;
    for (int n = 3; n >= 0; --n) g.xs[n] = g.xs[n + 1] * (n >= 1 ? g.in[n - 1] : g.c);
  } else {
    g.xs[0] = d.x_strides[0];
    g.xs[1] = d.x_strides[1];
    for (int k = 0; k < d.nd; ++k) g.xs[2 + off + k] = d.x_strides[2 + k];
  }
  return g;
}

}  // namespace tessera::kernels
