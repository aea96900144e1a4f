#pragma once
// Upsampling element functions shared by the OpenMP loops and the CUDA kernels, on
// geometry normalized to 3 spatial dims (unused leading dims have extent and scale 1).
// The backward gathers each dx cell from the dy cells that read it (candidates
// [(i-1)*scale, (i+2)*scale) per dim cover both taps and the edge clamps), so it
// needs no atomics.
#include "kernels/floor.hpp"
#include "decomp/box.hpp"
#include "decomp/host_device.hpp"
#include "kernels/hd_math.hpp"
#include "kernels/spatial_index.hpp"
#include "kernels/upsample.hpp"
#include "kernels/window_geom.hpp"

namespace tessera::kernels {

struct UpsampleGeom : WindowGeom {
  UpsampleMode mode = UpsampleMode::Nearest;
  Index s[3] = {1, 1, 1}, g[3] = {1, 1, 1};  // scale, global input extent
  // Outputs [lo, hi) of dim d (global, within the window) that may read input p (global):
  // [(p-1)*scale, (p+2)*scale) covers both taps and the edge clamps; with aligned corners,
  // those whose source lies in [p-1, p+1] (src = o (G-1) / (G scale - 1)).
  TESSERA_HD void readers(int d, Index p, Index& lo, Index& hi) const {
    if (mode == UpsampleMode::LinearAlignCorners) {
      const Index den = g[d] * s[d] - 1, gm = g[d] - 1;
      lo = gm == 0 ? olo[d] : max_i(floor_div((p - 1) * den, gm), olo[d]);
      hi = gm == 0 ? olo[d] + on[d] : min_i(floor_div((p + 1) * den, gm) + 1, olo[d] + on[d]);
      return;
    }
    lo = max_i((p - 1) * s[d], olo[d]);
    hi = min_i((p + 2) * s[d], olo[d] + on[d]);
  }
  // Weight with which output o (global) reads input i (global) in dim d.
  TESSERA_HD double weight(int d, Index o, Index i) const {
    const UpsampleTap t = upsample_tap(mode, s[d], g[d], o);
    return (t.i0 == i ? 1.0 - t.w1 : 0.0) + (t.i1 == i ? t.w1 : 0.0);
  }
};

// Validates d (throws tessera::Error naming `where`) and normalizes it.
UpsampleGeom upsample_geometry(const UpsampleDesc& d, const char* where);

template <class T>
struct UpsampleForward {
  UpsampleGeom g;
  const T* x;
  T* y;
  TESSERA_HD void operator()(Index i) const {
    Index o[3], cc, nn;
    unravel_nc3(i, g.c, g.on, o, cc, nn, g.olo);
    at(i, nn, cc, o);
  }
  // Output i at (nn, cc, o) (global o): the host walks rows and calls this without the decode.
  TESSERA_HD void at(Index i, Index nn, Index cc, const Index o[3]) const {
    UpsampleTap t[3];
    for (int d = 0; d < 3; ++d) t[d] = upsample_tap(g.mode, g.s[d], g.g[d], o[d]);
    at_taps(i, nn, cc, t);
  }
  // ... with the output's taps per dim given (the host reads them from tables).
  TESSERA_HD void at_taps(Index i, Index nn, Index cc, const UpsampleTap t[3]) const {
    const T* xnc = x + nn * g.xs[0] + cc * g.xs[1];
    double acc = 0;
    for (int a = 0; a < 2; ++a) {
      const double wa = a ? t[0].w1 : 1.0 - t[0].w1;
      if (wa == 0.0) continue;
      const Index pa = (a ? t[0].i1 : t[0].i0) - g.ilo[0];
      for (int b = 0; b < 2; ++b) {
        const double wb = b ? t[1].w1 : 1.0 - t[1].w1;
        if (wb == 0.0) continue;
        const Index pb = (b ? t[1].i1 : t[1].i0) - g.ilo[1];
        for (int e = 0; e < 2; ++e) {
          const double we = e ? t[2].w1 : 1.0 - t[2].w1;
          if (we == 0.0) continue;
          const Index pe = (e ? t[2].i1 : t[2].i0) - g.ilo[2];
          acc +=
              wa * wb * we * static_cast<double>(xnc[pa * g.xs[2] + pb * g.xs[3] + pe * g.xs[4]]);
        }
      }
    }
    y[i] = static_cast<T>(acc);
  }
};

template <class T>
struct UpsampleBackward {
  UpsampleGeom g;
  const T* dy;
  T* dx;
  TESSERA_HD void operator()(Index i) const {
    Index p[3], cc, nn;
    unravel_nc3(i, g.c, g.in, p, cc, nn, g.ilo);
    at(i, nn, cc, p);
  }
  TESSERA_HD void at(Index, Index nn, Index cc, const Index p[3]) const {
    Index lo[3], hi[3];
    for (int d = 0; d < 3; ++d) g.readers(d, p[d], lo[d], hi[d]);
    const T* dync = dy + (nn * g.c + cc) * g.on[0] * g.on[1] * g.on[2];
    double acc = 0;
    for (Index a = lo[0]; a < hi[0]; ++a) {
      const double wa = g.weight(0, a, p[0]);
      if (wa == 0.0) continue;
      for (Index b = lo[1]; b < hi[1]; ++b) {
        const double wb = g.weight(1, b, p[1]);
        if (wb == 0.0) continue;
        for (Index e = lo[2]; e < hi[2]; ++e) {
          const double we = g.weight(2, e, p[2]);
          if (we == 0.0) continue;
          const Index off = ((a - g.olo[0]) * g.on[1] + (b - g.olo[1])) * g.on[2] + (e - g.olo[2]);
          acc += wa * wb * we * static_cast<double>(dync[off]);
        }
      }
    }
    dx[g.x_offset(nn, cc, p)] = static_cast<T>(acc);
  }
};

}  // namespace tessera::kernels
