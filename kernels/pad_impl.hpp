#pragma once
// Padding element functions shared by the OpenMP loops and the CUDA kernels, on geometry
// normalized to 3 spatial dims (unused leading dims have extent 1 and no padding). The
// forward copies one output cell per call; the backward gathers one dx cell per call from
// the dy cells that copy it (pad_readers), so it needs no atomics and overwrites dx.
#include "kernels/floor.hpp"
#include "decomp/box.hpp"
#include "decomp/host_device.hpp"
#include "kernels/hd_math.hpp"
#include "kernels/pad.hpp"
#include "kernels/spatial_index.hpp"
#include "kernels/window_geom.hpp"

namespace tessera::kernels {

struct PadGeom : WindowGeom {
  PadMode mode = PadMode::Constant;
  double value = 0.0;
  Index g[3] = {1, 1, 1}, plo[3] = {0, 0, 0}, phi[3] = {0, 0, 0};  // global extent, padding
};

// Validates d (throws tessera::Error naming `where`) and normalizes it.
PadGeom pad_geometry(const PadDesc& d, const char* where);

template <class T>
struct PadForward {
  PadGeom g;
  const T* x;
  T* y;
  TESSERA_HD void operator()(Index i) const {
    Index o[3], cc, nn;
    unravel_nc3(i, g.c, g.on, o, cc, nn, g.olo);
    at(i, nn, cc, o);
  }
  // Output i at (nn, cc, o) (global o).
  TESSERA_HD void at(Index i, Index nn, Index cc, const Index o[3]) const {
    Index p[3];
    for (int d = 0; d < 3; ++d) {
      p[d] = pad_source(g.mode, g.g[d], g.plo[d], o[d]);
      if (p[d] == kPadConstant) {
        y[i] = static_cast<T>(g.value);
        return;
      }
    }
    y[i] = x[g.x_offset(nn, cc, p)];
  }
};

template <class T>
struct PadBackward {
  PadGeom g;
  const T* dy;
  T* dx;
  TESSERA_HD void operator()(Index i) const {
    Index p[3], cc, nn;
    unravel_nc3(i, g.c, g.in, p, cc, nn, g.ilo);
    at(i, nn, cc, p);
  }
  TESSERA_HD void at(Index, Index nn, Index cc, const Index p[3]) const {
    Index lo[3][3], hi[3][3];
    int runs[3];
    for (int d = 0; d < 3; ++d) {
      runs[d] = pad_readers(g.mode, g.g[d], g.plo[d], g.phi[d], p[d], lo[d], hi[d]);
      for (int r = 0; r < runs[d]; ++r) {  // within the output window
        lo[d][r] = max_i(lo[d][r], g.olo[d]);
        hi[d][r] = min_i(hi[d][r], g.olo[d] + g.on[d]);
      }
    }
    const T* dync = dy + (nn * g.c + cc) * g.on[0] * g.on[1] * g.on[2];
    double acc = 0;
    for (int ra = 0; ra < runs[0]; ++ra)
      for (Index a = lo[0][ra]; a < hi[0][ra]; ++a)
        for (int rb = 0; rb < runs[1]; ++rb)
          for (Index b = lo[1][rb]; b < hi[1][rb]; ++b)
            for (int re = 0; re < runs[2]; ++re)
              for (Index e = lo[2][re]; e < hi[2][re]; ++e) {
                const Index off =
                    ((a - g.olo[0]) * g.on[1] + (b - g.olo[1])) * g.on[2] + (e - g.olo[2]);
                acc += static_cast<double>(dync[off]);
              }
    dx[g.x_offset(nn, cc, p)] = static_cast<T>(acc);
  }
};

}  // namespace tessera::kernels
