// Host physics attention point passes: OpenMP over (sample, head, block of kTile points);
// inside a block the loops run over the points innermost (contiguous in the channel-first
// layout), so they vectorize. Each block's partial sums land in their own slot and are added
// in block order afterwards: the result is the same at any thread count.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/simd_clones.hpp"
#include "kernels/cpu/vec_exp.hpp"
#include "kernels/device/scratch.hpp"
#include "kernels/dispatch.hpp"
#include "kernels/physics_attention.hpp"

namespace tessera::kernels::cpu {
namespace {

constexpr Index kTile = 256;

struct Geometry {
  Index N, H, D, M, P, tiles;
  explicit Geometry(const PhysicsShape& s)
      : N(s.batch),
        H(s.heads),
        D(s.dim),
        M(s.slices),
        P(s.points),
        tiles((s.points + kTile - 1) / kTile) {}
  Index jobs() const { return N * H * tiles; }
  // Slice inputs a and values f of (n, h): rows of P points.
  Index a_offset(Index n, Index h) const { return (n * 2 * H + h) * D * P; }
  Index f_offset(Index n, Index h) const { return ((n * 2 + 1) * H + h) * D * P; }
  Index w_offset(Index n, Index h) const { return (n * H + h) * M * P; }
  Index y_offset(Index n, Index h) const { return (n * H + h) * D * P; }
  Index token_offset(Index n, Index h) const { return (n * H + h) * M * D; }
};

// logits[m, i] = (ws[m, :] . a[:, p0 + i] + bs[m]) / tau for the block's len points.
template <class T>
[[gnu::always_inline]] inline void slice_logits(const Geometry& g, const T* a, Index p0, Index len,
                                                const SliceParams& sp, double tau, double* logits) {
  for (Index m = 0; m < g.M; ++m) {
    double* l = logits + m * kTile;
    for (Index i = 0; i < len; ++i) l[i] = sp.bs[m];
    for (Index d = 0; d < g.D; ++d) {
      const double c = sp.ws[m * g.D + d];
      const T* ad = a + d * g.P + p0;
#pragma omp simd
      for (Index i = 0; i < len; ++i) l[i] += c * static_cast<double>(ad[i]);
    }
    for (Index i = 0; i < len; ++i) l[i] /= tau;
  }
}

// Softmax over m of logits (M, kTile) for len points, in place.
[[gnu::always_inline]] inline void softmax_slices(const Geometry& g, Index len, double* l) {
  double mx[kTile], sum[kTile];
  for (Index i = 0; i < len; ++i) mx[i] = l[i], sum[i] = 0;
  for (Index m = 1; m < g.M; ++m)
#pragma omp simd  // std::max's branch kept this loop scalar: a quarter of the pass
    for (Index i = 0; i < len; ++i) mx[i] = mx[i] < l[m * kTile + i] ? l[m * kTile + i] : mx[i];
  for (Index m = 0; m < g.M; ++m)
#pragma omp simd
    for (Index i = 0; i < len; ++i) {
      l[m * kTile + i] = exp_accurate(l[m * kTile + i] - mx[i]);
      sum[i] += l[m * kTile + i];
    }
  for (Index m = 0; m < g.M; ++m)
    for (Index i = 0; i < len; ++i) l[m * kTile + i] /= sum[i];
}

// One (sample, head, block of points): the block's slice weights into w and its partial
// sums (per slice: D weighted features, then the weights' sum) into out.
template <class T>
TESSERA_SIMD_CLONES void slice_job(const Geometry& g, const T* x, const SliceParams& sp, T* w,
                                   Index job, double* l, double* out) {
  const Index n = job / (g.H * g.tiles), h = job / g.tiles % g.H, tile = job % g.tiles;
  const Index p0 = tile * kTile, len = std::min(kTile, g.P - p0);
  const T* a = x + g.a_offset(n, h);
  const T* f = x + g.f_offset(n, h);
  slice_logits(g, a, p0, len, sp, sp.tau[h], l);
  softmax_slices(g, len, l);
  for (Index m = 0; m < g.M; ++m) {
    const double* wm = l + m * kTile;
    T* wdst = w + g.w_offset(n, h) + m * g.P + p0;
    double z = 0;
#pragma omp simd reduction(+ : z)  // in lanes: a chain of scalar adds took a fifth of the pass
    for (Index i = 0; i < len; ++i) {
      wdst[i] = static_cast<T>(wm[i]);
      z += wm[i];
    }
    for (Index d = 0; d < g.D; ++d) {
      const T* fd = f + d * g.P + p0;
      double sum = 0;
#pragma omp simd reduction(+ : sum)
      for (Index i = 0; i < len; ++i) sum += wm[i] * static_cast<double>(fd[i]);
      out[m * (g.D + 1) + d] = sum;
    }
    out[m * (g.D + 1) + g.D] = z;
  }
}

template <class T>
void slice(const PhysicsShape& s, const T* x, const SliceParams& sp, T* w, double* acc) {
  const Geometry g(s);
  const Index slot = g.M * (g.D + 1);
  ScratchVector<double> part(static_cast<std::size_t>(g.jobs() * slot));
#pragma omp parallel
  {
    std::vector<double> l(static_cast<std::size_t>(g.M * kTile));
#pragma omp for schedule(static)
    for (Index job = 0; job < g.jobs(); ++job)
      slice_job(g, x, sp, w, job, l.data(), part.data() + job * slot);
  }
  std::fill(acc, acc + g.N * g.H * slot, 0.0);
  for (Index job = 0; job < g.jobs(); ++job) {
    double* dst = acc + job / g.tiles * slot;
    const double* src = part.data() + job * slot;
    for (Index i = 0; i < slot; ++i) dst[i] += src[i];
  }
}

// dst[i] = sum_m c[m D + d] w[m, p0 + i] for a block's len points (w: the (sample, head)'s
// slice weights; row: len of scratch): the de-slice, and the values' gradient.
template <class T>
[[gnu::always_inline]] inline void mix_slices(const Geometry& g, const double* c, const T* w,
                                              Index d, Index p0, Index len, double* row, T* dst) {
  std::fill(row, row + len, 0.0);
  for (Index m = 0; m < g.M; ++m) {
    const double cm = c[m * g.D + d];
    const T* wm = w + m * g.P + p0;
#pragma omp simd
    for (Index i = 0; i < len; ++i) row[i] += cm * static_cast<double>(wm[i]);
  }
  for (Index i = 0; i < len; ++i) dst[i] = static_cast<T>(row[i]);
}

// One block: y[d, i] = sum_m o[m, d] w[m, i].
template <class T>
TESSERA_SIMD_CLONES void deslice_job(const Geometry& g, const T* w, const double* o, T* y,
                                     Index job, double* row) {
  const Index n = job / (g.H * g.tiles), h = job / g.tiles % g.H, tile = job % g.tiles;
  const Index p0 = tile * kTile, len = std::min(kTile, g.P - p0);
  const double* on = o + g.token_offset(n, h);
  for (Index d = 0; d < g.D; ++d)
    mix_slices(g, on, w + g.w_offset(n, h), d, p0, len, row, y + g.y_offset(n, h) + d * g.P + p0);
}

template <class T>
void deslice(const PhysicsShape& s, const T* w, const double* o, T* y) {
  const Geometry g(s);
#pragma omp parallel
  {
    std::vector<double> row(static_cast<std::size_t>(kTile));
#pragma omp for schedule(static)
    for (Index job = 0; job < g.jobs(); ++job) deslice_job(g, w, o, y, job, row.data());
  }
}

// One block's partial d_o[m, d] = sum_i w[m, i] dy[d, i].
template <class T>
TESSERA_SIMD_CLONES void deslice_grad_job(const Geometry& g, const T* w, const T* dy, Index job,
                                          double* out) {
  const Index n = job / (g.H * g.tiles), h = job / g.tiles % g.H, tile = job % g.tiles;
  const Index p0 = tile * kTile, len = std::min(kTile, g.P - p0);
  for (Index m = 0; m < g.M; ++m) {
    const T* wm = w + g.w_offset(n, h) + m * g.P + p0;
    for (Index d = 0; d < g.D; ++d) {
      const T* gd = dy + g.y_offset(n, h) + d * g.P + p0;
      double sum = 0;
#pragma omp simd reduction(+ : sum)
      for (Index i = 0; i < len; ++i)
        sum += static_cast<double>(wm[i]) * static_cast<double>(gd[i]);
      out[m * g.D + d] = sum;
    }
  }
}

template <class T>
void deslice_grad(const PhysicsShape& s, const T* w, const T* dy, double* d_o) {
  const Geometry g(s);
  const Index slot = g.M * g.D;
  ScratchVector<double> part(static_cast<std::size_t>(g.jobs() * slot));
#pragma omp parallel for schedule(static)
  for (Index job = 0; job < g.jobs(); ++job)
    deslice_grad_job(g, w, dy, job, part.data() + job * slot);
  std::fill(d_o, d_o + g.N * g.H * slot, 0.0);
  for (Index job = 0; job < g.jobs(); ++job) {
    double* dst = d_o + job / g.tiles * slot;
    const double* src = part.data() + job * slot;
    for (Index i = 0; i < slot; ++i) dst[i] += src[i];
  }
}

// One block's backward: its input gradients into dx, its partial parameter gradients (dws,
// dbs, dtau) into out. l, dl: M kTile of scratch; row: kTile.
template <class T>
TESSERA_SIMD_CLONES void slice_backward_job(const Geometry& g, const SliceParams& sp,
                                            const SliceBackward& b, Index job, double* l,
                                            double* dl, double* row, double* out) {
  const T* x = static_cast<const T*>(b.x);
  const T* w = static_cast<const T*>(b.w);
  const T* dy = static_cast<const T*>(b.dy);
  T* dx = static_cast<T*>(b.dx);
  const Index n = job / (g.H * g.tiles), h = job / g.tiles % g.H, tile = job % g.tiles;
  const Index p0 = tile * kTile, len = std::min(kTile, g.P - p0);
  const double tau = sp.tau[h];
  const T* a = x + g.a_offset(n, h);
  const T* f = x + g.f_offset(n, h);
  const T* gy = dy + g.y_offset(n, h);
  const double* on = b.o + g.token_offset(n, h);
  const double* dan = b.da + g.token_offset(n, h);
  const double* dzn = b.dz + (n * g.H + h) * g.M;
  slice_logits(g, a, p0, len, sp, 1.0, l);  // L = ws a + bs (before 1/tau)
  // dw[m, i] = O[m] . dy_i + dA[m] . f_i + dZ[m]
  for (Index m = 0; m < g.M; ++m) {
    double* dw = dl + m * kTile;
    for (Index i = 0; i < len; ++i) dw[i] = dzn[m];
    for (Index d = 0; d < g.D; ++d) {
      const double co = on[m * g.D + d], ca = dan[m * g.D + d];
      const T* gd = gy + d * g.P + p0;
      const T* fd = f + d * g.P + p0;
#pragma omp simd
      for (Index i = 0; i < len; ++i)
        dw[i] += co * static_cast<double>(gd[i]) + ca * static_cast<double>(fd[i]);
    }
  }
  // Softmax adjoint: dlogit = w (dw - sum_m w dw); dL = dlogit / tau.
  std::fill(row, row + len, 0.0);
  for (Index m = 0; m < g.M; ++m) {
    const T* wm = w + g.w_offset(n, h) + m * g.P + p0;
    for (Index i = 0; i < len; ++i) row[i] += static_cast<double>(wm[i]) * dl[m * kTile + i];
  }
  double dtau = 0;
  for (Index m = 0; m < g.M; ++m) {
    const T* wm = w + g.w_offset(n, h) + m * g.P + p0;
    double* d = dl + m * kTile;
    const double* lm = l + m * kTile;
    double db = 0, dt = 0;  // lane-wise partial sums: the divisions run as vectors
#pragma omp simd reduction(+ : db, dt)
    for (Index i = 0; i < len; ++i) {
      const double dlogit = static_cast<double>(wm[i]) * (d[i] - row[i]);
      dt += dlogit * lm[i] / (tau * tau);
      d[i] = dlogit / tau;
      db += d[i];
    }
    dtau -= dt;
    out[g.M * g.D + m] = db;
    for (Index dd = 0; dd < g.D; ++dd) {
      const T* ad = a + dd * g.P + p0;
      double sum = 0;
#pragma omp simd reduction(+ : sum)
      for (Index i = 0; i < len; ++i) sum += d[i] * static_cast<double>(ad[i]);
      out[m * g.D + dd] = sum;
    }
  }
  out[g.M * g.D + g.M] = dtau;
  // da[d, i] = sum_m dL[m, i] ws[m, d];  df[d, i] = sum_m w[m, i] dA[m, d].
  for (Index d = 0; d < g.D; ++d) {
    std::fill(row, row + len, 0.0);
    for (Index m = 0; m < g.M; ++m) {
      const double c = sp.ws[m * g.D + d];
      const double* dm = dl + m * kTile;
#pragma omp simd
      for (Index i = 0; i < len; ++i) row[i] += c * dm[i];
    }
    T* dad = dx + g.a_offset(n, h) + d * g.P + p0;
    for (Index i = 0; i < len; ++i) dad[i] = static_cast<T>(row[i]);
    mix_slices(g, dan, w + g.w_offset(n, h), d, p0, len, row, dx + g.f_offset(n, h) + d * g.P + p0);
  }
}

template <class T>
void slice_backward(const PhysicsShape& s, const SliceParams& sp, const SliceBackward& b) {
  const Geometry g(s);
  // Per job: dws (M D), dbs (M), dtau (1).
  const Index slot = g.M * g.D + g.M + 1;
  ScratchVector<double> part(static_cast<std::size_t>(g.jobs() * slot));
#pragma omp parallel
  {
    std::vector<double> l(static_cast<std::size_t>(g.M * kTile)),
        dl(static_cast<std::size_t>(g.M * kTile)), row(static_cast<std::size_t>(kTile));
#pragma omp for schedule(static)
    for (Index job = 0; job < g.jobs(); ++job)
      slice_backward_job<T>(g, sp, b, job, l.data(), dl.data(), row.data(),
                            part.data() + job * slot);
  }
  for (Index job = 0; job < g.jobs(); ++job) {
    const Index h = job / g.tiles % g.H;
    const double* src = part.data() + job * slot;
    for (Index i = 0; i < g.M * g.D; ++i) b.dws[i] += src[i];
    for (Index m = 0; m < g.M; ++m) b.dbs[m] += src[g.M * g.D + m];
    b.dtau[h] += src[g.M * g.D + g.M];
  }
}

}  // namespace

void physics_slice(DType t, const PhysicsShape& s, const void* x, const SliceParams& p, void* w,
                   double* acc) {
  dispatch(t, [&](auto z) {
    using T = decltype(z);
    slice(s, static_cast<const T*>(x), p, static_cast<T*>(w), acc);
  });
}

void physics_deslice(DType t, const PhysicsShape& s, const void* w, const double* o, void* y) {
  dispatch(t, [&](auto z) {
    using T = decltype(z);
    deslice(s, static_cast<const T*>(w), o, static_cast<T*>(y));
  });
}

void physics_deslice_grad(DType t, const PhysicsShape& s, const void* w, const void* dy,
                          double* d_o) {
  dispatch(t, [&](auto z) {
    using T = decltype(z);
    deslice_grad(s, static_cast<const T*>(w), static_cast<const T*>(dy), d_o);
  });
}

void physics_slice_backward(DType t, const PhysicsShape& s, const SliceParams& p,
                            const SliceBackward& b) {
  dispatch(t, [&](auto z) {
    using T = decltype(z);
    slice_backward<T>(s, p, b);
  });
}

}  // namespace tessera::kernels::cpu
