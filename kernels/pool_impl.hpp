#pragma once
// Pooling index arithmetic and element functions shared by the OpenMP loops and the CUDA
// kernels. Geometry is normalized to 3 spatial dims (unused leading dims have extent 1)
// with resolved strides. The forward computes one output cell per call; the backward
// gathers one dx cell per call from the outputs whose window covers it, so it needs no
// atomics and overwrites dx; max pooling first records each window's argmax.
#include "kernels/floor.hpp"
#include "decomp/box.hpp"
#include "decomp/host_device.hpp"
#include "kernels/hd_math.hpp"
#include "kernels/pool.hpp"
#include "kernels/spatial_index.hpp"

namespace tessera::kernels {

struct PoolGeom {
  Index n = 1, c = 1;
  Index in[3] = {1, 1, 1}, k[3] = {1, 1, 1}, s[3] = {1, 1, 1}, plo[3] = {0, 0, 0};
  Index dil[3] = {1, 1, 1};  // > 1 for max pooling only
  Index out[3] = {1, 1, 1};
  Index end[3] = {1, 1, 1};       // end of the counted padded extent (in + counted right padding)
  Index xs[5] = {0, 0, 0, 0, 0};  // strides of (n, c, d0, d1, d2)
  bool max = true;
  bool include_pad = true;

  TESSERA_HD Index out_count() const { return n * c * out[0] * out[1] * out[2]; }
  TESSERA_HD Index in_count() const { return n * c * in[0] * in[1] * in[2]; }
  // Real cells of the window of output o in dim d: lo, lo + dil, ... below hi (the first
  // window cell at or past 0; past the input where none is inside).
  TESSERA_HD void window(int d, Index o, Index& lo, Index& hi) const {
    pool_window_cells(o * s[d] - plo[d], k[d], dil[d], in[d], lo, hi);
  }
  TESSERA_HD void windows(const Index o[3], Index lo[3], Index hi[3]) const {
    for (int d = 0; d < 3; ++d) window(d, o[d], lo[d], hi[d]);
  }
  // Offset of spatial cell (a, b, e) within an (n, c) plane of x.
  TESSERA_HD Index x_at(Index a, Index b, Index e) const {
    return a * xs[2] + b * xs[3] + e * xs[4];
  }
};

// Validates d (throws tessera::Error naming `where`) and normalizes it.
PoolGeom pool_geometry(const PoolDesc& d, const char* where);

// Spatial cell (within the window) of the first maximum of output window o.
template <class T>
TESSERA_HD inline void pool_argmax(const PoolGeom& g, const T* xnc, const Index o[3],
                                   Index best[3]) {
  Index lo[3], hi[3];
  g.windows(o, lo, hi);
  for (int d = 0; d < 3; ++d) best[d] = lo[d];
  bool first = true;
  T bv = T(0);
  for (Index a = lo[0]; a < hi[0]; a += g.dil[0])
    for (Index b = lo[1]; b < hi[1]; b += g.dil[1])
      for (Index e = lo[2]; e < hi[2]; e += g.dil[2]) {
        const T v = xnc[g.x_at(a, b, e)];
        // The first NaN wins and stays, as in PyTorch (NaN propagates).
        if (first || v > bv || (v != v && bv == bv)) {
          first = false;
          bv = v;
          best[0] = a;
          best[1] = b;
          best[2] = e;
        }
      }
}

TESSERA_HD inline double pool_divisor(const PoolGeom& g, const Index o[3]) {
  Index v = 1;
  for (int d = 0; d < 3; ++d) {
    if (g.include_pad) {
      // The window clipped to the counted padded extent (the kernel, but for a ceil-mode
      // window that overhangs the right padding), as PyTorch divides.
      const Index start = o[d] * g.s[d] - g.plo[d];
      v *= min_i(start + g.k[d], g.end[d]) - start;
    } else {
      Index lo, hi;
      g.window(d, o[d], lo, hi);
      v *= hi - lo;
    }
  }
  return static_cast<double>(v);
}

template <class T>
struct PoolForward {
  PoolGeom g;
  const T* x;
  T* y;
  TESSERA_HD void operator()(Index i) const {
    Index o[3], cc, nn;
    unravel_nc3(i, g.c, g.out, o, cc, nn);
    at(i, nn, cc, o);
  }
  // Output i at (nn, cc, o): the host walks rows and calls this without the decode.
  TESSERA_HD void at(Index i, Index nn, Index cc, const Index o[3]) const {
    const T* xnc = x + nn * g.xs[0] + cc * g.xs[1];
    if (g.max) {
      Index b[3] = {0, 0, 0};
      pool_argmax(g, xnc, o, b);
      y[i] = xnc[g.x_at(b[0], b[1], b[2])];
      return;
    }
    Index lo[3], hi[3];
    g.windows(o, lo, hi);
    double acc = 0;
    for (Index a = lo[0]; a < hi[0]; ++a)
      for (Index b = lo[1]; b < hi[1]; ++b)
        for (Index e = lo[2]; e < hi[2]; ++e) acc += static_cast<double>(xnc[g.x_at(a, b, e)]);
    y[i] = static_cast<T>(acc / pool_divisor(g, o));
  }
};

// Max pooling backward, first pass: the argmax of every output window as a spatial
// linear index within the (n, c) plane, so the gather below compares indices instead of
// rescanning each covering window (out * k^d work instead of in * (k/s)^d * k^d).
template <class T>
struct PoolArgmax {
  PoolGeom g;
  const T* x;
  Index* arg;  // out_count() entries
  TESSERA_HD void operator()(Index i) const {
    Index o[3], cc, nn;
    unravel_nc3(i, g.c, g.out, o, cc, nn);
    at(i, nn, cc, o);
  }
  TESSERA_HD void at(Index i, Index nn, Index cc, const Index o[3]) const {
    Index b[3] = {0, 0, 0};
    pool_argmax(g, x + nn * g.xs[0] + cc * g.xs[1], o, b);
    arg[i] = (b[0] * g.in[1] + b[1]) * g.in[2] + b[2];
  }
};

// Backward, gathering each dx cell from the outputs whose window covers it (for max
// pooling those whose argmax it is, from PoolArgmax).
template <class T>
struct PoolBackward {
  PoolGeom g;
  const Index* arg;  // max pooling only
  const T* dy;
  T* dx;
  TESSERA_HD void operator()(Index i) const {
    Index p[3], cc, nn;
    unravel_nc3(i, g.c, g.in, p, cc, nn);
    at(i, nn, cc, p);
  }
  TESSERA_HD void at(Index, Index nn, Index cc, const Index p[3]) const {
    Index olo[3], ohi[3];
    for (int d = 0; d < 3; ++d) covering(d, p[d], olo[d], ohi[d]);
    at_range(nn, cc, p, olo, ohi);
  }
  // Outputs [lo, hi) in dim d whose window spans cell p: o*s - plo <= p < o*s - plo + span
  // (with dilation a superset: max pooling keeps only the argmax's own outputs).
  TESSERA_HD void covering(int d, Index p, Index& lo, Index& hi) const {
    const Index span = g.dil[d] * (g.k[d] - 1) + 1;
    lo = max_i(floor_div(p + g.plo[d] - span, g.s[d]) + 1, 0);
    hi = min_i(floor_div(p + g.plo[d], g.s[d]) + 1, g.out[d]);
  }
  // ... with the covering outputs given (the host reads them from tables).
  TESSERA_HD void at_range(Index nn, Index cc, const Index p[3], const Index olo[3],
                           const Index ohi[3]) const {
    const Index plane = (nn * g.c + cc) * g.out[0] * g.out[1] * g.out[2];
    const Index self = (p[0] * g.in[1] + p[1]) * g.in[2] + p[2];
    double acc = 0;
    Index o[3];
    for (o[0] = olo[0]; o[0] < ohi[0]; ++o[0])
      for (o[1] = olo[1]; o[1] < ohi[1]; ++o[1])
        for (o[2] = olo[2]; o[2] < ohi[2]; ++o[2]) {
          const Index oi = plane + (o[0] * g.out[1] + o[1]) * g.out[2] + o[2];
          const double v = static_cast<double>(dy[oi]);
          if (g.max) {
            if (arg[oi] == self) acc += v;
          } else {
            acc += v / pool_divisor(g, o);
          }
        }
    dx[nn * g.xs[0] + cc * g.xs[1] + g.x_at(p[0], p[1], p[2])] = static_cast<T>(acc);
  }
};

}  // namespace tessera::kernels
