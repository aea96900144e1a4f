// Host neighbourhood attention, in bands: the queries of a (sample, head) are cut into tiles of
// whole rows of the first dim (about kTileCells queries), and only a tile's queries and the band
// of frame rows their windows reach are turned channels-last in float64, so per query the
// window's keys are contiguous D-vectors in a buffer that stays in cache. (Turning the whole
// plane channels-last cost a zero-filled scratch of 7 planes per thread: at 512^2 tokens a
// fifth of the time went to first-touch page faults.) A row's scores are exponentiated in one
// vector pass (exp_pass). Forward: OpenMP over (sample, head, tile). Backward: over
// (sample, head), tiles in order; a tile's key and value gradients accumulate in float64 over
// its band and are added to the frame once per tile (bands of neighbouring tiles overlap), in
// a fixed order.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/cpu/simd_clones.hpp"
#include "kernels/cpu/vec_exp.hpp"
#include "kernels/device/scratch.hpp"
#include "kernels/dispatch.hpp"
#include "kernels/neighborhood_attention.hpp"

namespace tessera::kernels::cpu {
namespace {

constexpr Index kTileCells = 4096;  // queries per tile (8 rows of a 512^2 grid)

struct Geometry {
  const NeighborhoodDesc& d;
  Index C, qcells = 1, fcells = 1, keys = 1;
  Index qrow = 1;  // query cells per row of the first dim
  Index tile_rows = 1, tiles = 1;
  Index k[3] = {1, 1, 1}, step[3] = {0, 0, 0}, fstride[3] = {0, 0, 0};
  explicit Geometry(const NeighborhoodDesc& desc) : d(desc), C(desc.heads * desc.dim) {
    Index stride = 1;
    for (int i = d.nd - 1; i >= 0; --i) {
      fstride[i] = stride;
      stride *= d.f_shape[i];
    }
    for (int i = 0; i < d.nd; ++i) {
      qcells *= d.q_shape[i];
      fcells *= d.f_shape[i];
      keys *= d.kernel[i];
      k[i] = d.kernel[i];
      step[i] = d.dilation[i] * fstride[i];
    }
    qrow = qcells / std::max<Index>(1, d.q_shape[0]);
    const Index want = d.tile_cells > 0 ? d.tile_cells : kTileCells;
    tile_rows = std::max<Index>(1, want / std::max<Index>(1, qrow));
    tiles = (d.q_shape[0] + tile_rows - 1) / tile_rows;
  }
  // First frame row (dim 0) of local query row i's window.
  Index start_row(Index i) const {
    return neighborhood_start(d.q_lo[0] + i, d.extent[0], d.kernel[0], d.dilation[0]) - d.f_lo[0];
  }
  // Tile t: query rows [r0, r1) and the frame rows [f0, f1) their windows reach (with
  // dilation, starts are not monotonic in the row: the extremes over the tile).
  struct Tile {
    Index r0, r1, f0, f1;
    Index qcells(const Geometry& g) const { return (r1 - r0) * g.qrow; }
    Index fcells(const Geometry& g) const { return (f1 - f0) * g.fstride[0]; }
  };
  Tile tile(Index t) const {
    Tile tl{t * tile_rows, std::min(d.q_shape[0], (t + 1) * tile_rows), 0, 0};
    Index lo = start_row(tl.r0), hi = lo;
    for (Index i = tl.r0 + 1; i < tl.r1; ++i) {
      const Index s = start_row(i);
      lo = std::min(lo, s);
      hi = std::max(hi, s);
    }
    tl.f0 = lo;
    tl.f1 = hi + (d.kernel[0] - 1) * d.dilation[0] + 1;
    return tl;
  }
  // The largest band and tile over all tiles (scratch sizes).
  void largest(Index& q, Index& f) const {
    q = f = 0;
    for (Index t = 0; t < tiles; ++t) {
      const Tile tl = tile(t);
      q = std::max(q, tl.qcells(*this));
      f = std::max(f, tl.fcells(*this));
    }
  }
  // Band cells of query cell `qc`'s keys (qc local to the whole block), in window order (the
  // last dim fastest): the per-dim starts once per query, then offsets by nested loops.
  void window(Index qc, const Tile& tl, std::vector<Index>& cells) const {
    Index idx[3] = {0, 0, 0}, rest = qc, base = -tl.f0 * fstride[0];
    for (int i = d.nd - 1; i >= 0; --i) idx[i] = rest % d.q_shape[i], rest /= d.q_shape[i];
    for (int i = 0; i < d.nd; ++i)
      base += (neighborhood_start(d.q_lo[i] + idx[i], d.extent[i], d.kernel[i], d.dilation[i]) -
               d.f_lo[i]) *
              fstride[i];
    Index* out = cells.data();
    for (Index a = 0; a < k[0]; ++a)
      for (Index b = 0; b < k[1]; ++b) {
        const Index row = base + a * step[0] + b * step[1];
        for (Index c = 0; c < k[2]; ++c) *out++ = row + c * step[2];
      }
  }
};

double scale_of(const NeighborhoodDesc& d) {
  return d.scale > 0 ? d.scale : 1.0 / std::sqrt(static_cast<double>(d.dim));
}

// s[t] = e^(s[t] - shift) for t < n.
inline void exp_pass(double* s, Index n, double shift) {
#pragma omp simd
  for (Index t = 0; t < n; ++t) s[t] = exp_accurate(s[t] - shift);
}

// `cells` cells of D channels, channel c at src[c * stride + i] -> dst[i * D + c].
template <class T>
void to_rows(const T* src, Index stride, Index cells, Index D, double* dst) {
  for (Index c = 0; c < D; ++c)
    for (Index i = 0; i < cells; ++i) dst[i * D + c] = src[c * stride + i];
}

inline double dot(const double* a, const double* b, Index D) {
  double s = 0;
#pragma omp simd reduction(+ : s)
  for (Index c = 0; c < D; ++c) s += a[c] * b[c];
  return s;
}

// One query's window: out = softmax(sc q.k) v over the window's keys (rows of kt, vt at
// `cells`), returned in acc; returns the log-sum-exp. s: `keys` of scratch.
TESSERA_SIMD_CLONES
double forward_query(const double* qr, const double* kt, const double* vt, const Index* cells,
                     Index keys, Index D, double sc, double* s, double* acc) {
  double mx = -INFINITY;
  for (Index t = 0; t < keys; ++t) {
    const double v = sc * dot(qr, kt + cells[t] * D, D);
    s[t] = v;
    mx = std::max(mx, v);
  }
  exp_pass(s, keys, mx);
  double sum = 0;
  std::fill(acc, acc + D, 0.0);
  for (Index t = 0; t < keys; ++t) {
    const double pt = s[t];
    sum += pt;
    const double* vr = vt + cells[t] * D;
#pragma omp simd
    for (Index c = 0; c < D; ++c) acc[c] += pt * vr[c];
  }
  for (Index c = 0; c < D; ++c) acc[c] /= sum;
  return mx + std::log(sum);
}

// One query's backward: the probabilities again from its LSE, dS = P (dO.v - dd); adds
// sc dS q to dk and P dO to dv at the window's cells; returns sc dS K in acc. p: 2 `keys` of
// scratch.
TESSERA_SIMD_CLONES
void backward_query(const double* qr, const double* gr, double dd, double lse, const double* kt,
                    const double* vt, double* dkt, double* dvt, const Index* cells, Index keys,
                    Index D, double sc, double* p, double* acc) {
  double* ds = p + keys;
  for (Index j = 0; j < keys; ++j) p[j] = sc * dot(qr, kt + cells[j] * D, D);
  exp_pass(p, keys, lse);
  for (Index j = 0; j < keys; ++j) ds[j] = p[j] * (dot(gr, vt + cells[j] * D, D) - dd);
  std::fill(acc, acc + D, 0.0);
  for (Index j = 0; j < keys; ++j) {
    const Index f = cells[j];
    const double dsj = ds[j], pj = p[j];
    const double* kr = kt + f * D;
    double* dkr = dkt + f * D;
    double* dvr = dvt + f * D;
#pragma omp simd
    for (Index c = 0; c < D; ++c) {
      acc[c] += dsj * kr[c];
      dkr[c] += sc * dsj * qr[c];
      dvr[c] += pj * gr[c];
    }
  }
  for (Index c = 0; c < D; ++c) acc[c] *= sc;
}

template <class T>
void forward(const NeighborhoodDesc& d, const T* q, const T* kv, T* out, double* lse) {
  const Geometry g(d);
  const double sc = scale_of(d);
  const Index D = d.dim;
  Index qmax = 0, fmax = 0;
  g.largest(qmax, fmax);
  // Channels-last q of a tile, k and v of its band, per thread.
  ThreadScratch<double> rows(static_cast<std::size_t>((qmax + 2 * fmax) * D));
#pragma omp parallel
  {
    std::vector<Index> cells(static_cast<std::size_t>(g.keys));
    std::vector<double> s(static_cast<std::size_t>(g.keys)), acc(static_cast<std::size_t>(D));
    double* const qt = rows.mine();
    double* const kt = qt + qmax * D;
    double* const vt = kt + fmax * D;
#pragma omp for schedule(static)
    for (Index job = 0; job < d.batch * d.heads * g.tiles; ++job) {
      const Index nh = job / g.tiles, n = nh / d.heads, h = nh % d.heads;
      const Geometry::Tile tl = g.tile(job % g.tiles);
      const Index q0 = tl.r0 * g.qrow, f0 = tl.f0 * g.fstride[0];
      to_rows(q + (n * g.C + h * D) * g.qcells + q0, g.qcells, tl.qcells(g), D, qt);
      to_rows(kv + (n * 2 * g.C + h * D) * g.fcells + f0, g.fcells, tl.fcells(g), D, kt);
      to_rows(kv + (n * 2 * g.C + g.C + h * D) * g.fcells + f0, g.fcells, tl.fcells(g), D, vt);
      T* on = out + (n * g.C + h * D) * g.qcells;
      for (Index qc = q0; qc < q0 + tl.qcells(g); ++qc) {
        g.window(qc, tl, cells);
        lse[nh * g.qcells + qc] = forward_query(qt + (qc - q0) * D, kt, vt, cells.data(), g.keys, D,
                                                sc, s.data(), acc.data());
        for (Index c = 0; c < D; ++c)
          on[c * g.qcells + qc] = static_cast<T>(acc[static_cast<std::size_t>(c)]);
      }
    }
  }
}

template <class T>
void backward(const NeighborhoodDesc& d, const T* q, const T* kv, const T* out, const T* dout,
              const double* lse, T* dq, T* dkv) {
  const Geometry g(d);
  const double sc = scale_of(d);
  const Index D = d.dim;
  Index qmax = 0, fmax = 0;
  g.largest(qmax, fmax);
  // Channels-last q, out, dout of a tile and k, v, dk, dv of its band, per thread.
  ThreadScratch<double> rows(static_cast<std::size_t>((3 * qmax + 4 * fmax) * D));
#pragma omp parallel
  {
    std::vector<Index> cells(static_cast<std::size_t>(g.keys));
    std::vector<double> p(static_cast<std::size_t>(2 * g.keys)), acc(static_cast<std::size_t>(D));
    double* const qt = rows.mine();
    double* const ot = qt + qmax * D;
    double* const gt = ot + qmax * D;
    double* const kt = gt + qmax * D;
    double* const vt = kt + fmax * D;
    double* const dkt = vt + fmax * D;
    double* const dvt = dkt + fmax * D;
#pragma omp for schedule(static)
    for (Index nh = 0; nh < d.batch * d.heads; ++nh) {
      const Index n = nh / d.heads, h = nh % d.heads;
      const Index qoff = (n * g.C + h * D) * g.qcells;
      const Index koff = (n * 2 * g.C + h * D) * g.fcells;
      const Index voff = (n * 2 * g.C + g.C + h * D) * g.fcells;
      for (Index t = 0; t < g.tiles; ++t) {
        const Geometry::Tile tl = g.tile(t);
        const Index q0 = tl.r0 * g.qrow, f0 = tl.f0 * g.fstride[0];
        const Index nq = tl.qcells(g), nf = tl.fcells(g);
        to_rows(q + qoff + q0, g.qcells, nq, D, qt);
        to_rows(out + qoff + q0, g.qcells, nq, D, ot);
        to_rows(dout + qoff + q0, g.qcells, nq, D, gt);
        to_rows(kv + koff + f0, g.fcells, nf, D, kt);
        to_rows(kv + voff + f0, g.fcells, nf, D, vt);
        std::fill(dkt, dkt + nf * D, 0.0);
        std::fill(dvt, dvt + nf * D, 0.0);
        for (Index qc = q0; qc < q0 + nq; ++qc) {
          g.window(qc, tl, cells);
          const double* qr = qt + (qc - q0) * D;
          const double* gr = gt + (qc - q0) * D;
          const double dd = dot(gr, ot + (qc - q0) * D, D);  // D_i = dO . O
          backward_query(qr, gr, dd, lse[nh * g.qcells + qc], kt, vt, dkt, dvt, cells.data(),
                         g.keys, D, sc, p.data(), acc.data());
          for (Index c = 0; c < D; ++c)
            dq[qoff + c * g.qcells + qc] = static_cast<T>(acc[static_cast<std::size_t>(c)]);
        }
        for (Index c = 0; c < D; ++c)
          for (Index f = 0; f < nf; ++f) {
            dkv[koff + c * g.fcells + f0 + f] +=
                static_cast<T>(dkt[static_cast<std::size_t>(f * D + c)]);
            dkv[voff + c * g.fcells + f0 + f] +=
                static_cast<T>(dvt[static_cast<std::size_t>(f * D + c)]);
          }
      }
    }
  }
}

}  // namespace

void neighborhood_attention_forward(const NeighborhoodDesc& d, const void* q, const void* kv,
                                    void* out, double* lse) {
  dispatch(d.type, [&](auto z) {
    using T = decltype(z);
    forward(d, static_cast<const T*>(q), static_cast<const T*>(kv), static_cast<T*>(out), lse);
  });
}

void neighborhood_attention_backward(const NeighborhoodDesc& d, const void* q, const void* kv,
                                     const void* out, const void* dout, const double* lse, void* dq,
                                     void* dkv) {
  dispatch(d.type, [&](auto z) {
    using T = decltype(z);
    backward(d, static_cast<const T*>(q), static_cast<const T*>(kv), static_cast<const T*>(out),
             static_cast<const T*>(dout), lse, static_cast<T*>(dq), static_cast<T*>(dkv));
  });
}

}  // namespace tessera::kernels::cpu
