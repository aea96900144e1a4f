// Host neighbourhood attention: OpenMP over (sample, head); each (sample, head) is turned
// channels-last in float64 first, so per query the window's keys (enumerated from the per-dim
// starts) are contiguous D-vectors for the dot products and sums; key and value gradients
// accumulate in float64 and are added to the frame once.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/device/scratch.hpp"
#include "kernels/dispatch.hpp"
#include "kernels/neighborhood_attention.hpp"

namespace tessera::kernels::cpu {
namespace {

struct Geometry {
  const NeighborhoodDesc& d;
  Index C, qcells = 1, fcells = 1, keys = 1;
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
  }
  // Frame cells of query cell `qc`'s keys, in window order (the last dim fastest): the per-dim
  // starts once per query, then offsets by nested loops, no division per key (256^2 tokens,
  // 7 x 7, forward + backward: 0.45 -> 0.39 s).
  void window(Index qc, std::vector<Index>& cells) const {
    Index idx[3] = {0, 0, 0}, rest = qc, base = 0;
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

// Rows of one (sample, head): channel-first (D, cells) -> channels last (cells, D), so the
// per-key dot products and sums run over contiguous D-vectors.
template <class T>
void to_rows(const T* src, Index cells, Index D, double* dst) {
  for (Index c = 0; c < D; ++c)
    for (Index i = 0; i < cells; ++i) dst[i * D + c] = src[c * cells + i];
}

inline double dot(const double* a, const double* b, Index D) {
  double s = 0;
#pragma omp simd reduction(+ : s)
  for (Index c = 0; c < D; ++c) s += a[c] * b[c];
  return s;
}

template <class T>
void forward(const NeighborhoodDesc& d, const T* q, const T* kv, T* out, double* lse) {
  const Geometry g(d);
  const double sc = scale_of(d);
  const Index D = d.dim;
  // Channels-last q, k and v of one (sample, head) per thread.
  ThreadScratch<double> rows(static_cast<std::size_t>((g.qcells + 2 * g.fcells) * D));
#pragma omp parallel
  {
    std::vector<Index> cells(static_cast<std::size_t>(g.keys));
    std::vector<double> s(static_cast<std::size_t>(g.keys)), acc(static_cast<std::size_t>(D));
    double* const qt = rows.mine();
    double* const kt = qt + g.qcells * D;
    double* const vt = kt + g.fcells * D;
#pragma omp for schedule(static)
    for (Index nh = 0; nh < d.batch * d.heads; ++nh) {
      const Index n = nh / d.heads, h = nh % d.heads;
      to_rows(q + (n * g.C + h * D) * g.qcells, g.qcells, D, qt);
      to_rows(kv + (n * 2 * g.C + h * D) * g.fcells, g.fcells, D, kt);
      to_rows(kv + (n * 2 * g.C + g.C + h * D) * g.fcells, g.fcells, D, vt);
      T* on = out + (n * g.C + h * D) * g.qcells;
      for (Index qc = 0; qc < g.qcells; ++qc) {
        g.window(qc, cells);
        const double* qr = qt + qc * D;
        double mx = -INFINITY;
        for (Index t = 0; t < g.keys; ++t) {
          const double v = sc * dot(qr, kt + cells[static_cast<std::size_t>(t)] * D, D);
          s[static_cast<std::size_t>(t)] = v;
          mx = std::max(mx, v);
        }
        double sum = 0;
        std::fill(acc.begin(), acc.end(), 0.0);
        for (Index t = 0; t < g.keys; ++t) {
          const double p = std::exp(s[static_cast<std::size_t>(t)] - mx);
          sum += p;
          const double* vr = vt + cells[static_cast<std::size_t>(t)] * D;
#pragma omp simd
          for (Index c = 0; c < D; ++c) acc[static_cast<std::size_t>(c)] += p * vr[c];
        }
        for (Index c = 0; c < D; ++c)
          on[c * g.qcells + qc] = static_cast<T>(acc[static_cast<std::size_t>(c)] / sum);
        lse[nh * g.qcells + qc] = mx + std::log(sum);
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
  // Channels-last q, out, dout, k, v, dk and dv of one (sample, head) per thread.
  ThreadScratch<double> rows(static_cast<std::size_t>((3 * g.qcells + 4 * g.fcells) * D));
#pragma omp parallel
  {
    std::vector<Index> cells(static_cast<std::size_t>(g.keys));
    std::vector<double> p(static_cast<std::size_t>(g.keys)), ds(static_cast<std::size_t>(g.keys)),
        acc(static_cast<std::size_t>(D));
    double* const qt = rows.mine();
    double* const ot = qt + g.qcells * D;
    double* const gt = ot + g.qcells * D;
    double* const kt = gt + g.qcells * D;
    double* const vt = kt + g.fcells * D;
    double* const dkt = vt + g.fcells * D;
    double* const dvt = dkt + g.fcells * D;
#pragma omp for schedule(static)
    for (Index nh = 0; nh < d.batch * d.heads; ++nh) {
      const Index n = nh / d.heads, h = nh % d.heads;
      const Index qoff = (n * g.C + h * D) * g.qcells;
      const Index koff = (n * 2 * g.C + h * D) * g.fcells;
      const Index voff = (n * 2 * g.C + g.C + h * D) * g.fcells;
      to_rows(q + qoff, g.qcells, D, qt);
      to_rows(out + qoff, g.qcells, D, ot);
      to_rows(dout + qoff, g.qcells, D, gt);
      to_rows(kv + koff, g.fcells, D, kt);
      to_rows(kv + voff, g.fcells, D, vt);
      std::fill(dkt, dkt + g.fcells * D, 0.0);
      std::fill(dvt, dvt + g.fcells * D, 0.0);
      for (Index qc = 0; qc < g.qcells; ++qc) {
        g.window(qc, cells);
        const double* qr = qt + qc * D;
        const double* gr = gt + qc * D;
        const double dd = dot(gr, ot + qc * D, D);  // D_i = dO . O
        const double li = lse[nh * g.qcells + qc];
        for (Index t = 0; t < g.keys; ++t) {
          const Index f = cells[static_cast<std::size_t>(t)];
          const double pt = std::exp(sc * dot(qr, kt + f * D, D) - li);
          p[static_cast<std::size_t>(t)] = pt;
          ds[static_cast<std::size_t>(t)] = pt * (dot(gr, vt + f * D, D) - dd);
        }
        std::fill(acc.begin(), acc.end(), 0.0);
        for (Index t = 0; t < g.keys; ++t) {
          const Index f = cells[static_cast<std::size_t>(t)];
          const double dst = ds[static_cast<std::size_t>(t)], pt = p[static_cast<std::size_t>(t)];
          const double* kr = kt + f * D;
          double* dkr = dkt + f * D;
          double* dvr = dvt + f * D;
#pragma omp simd
          for (Index c = 0; c < D; ++c) {
            acc[static_cast<std::size_t>(c)] += dst * kr[c];
            dkr[c] += sc * dst * qr[c];
            dvr[c] += pt * gr[c];
          }
        }
        for (Index c = 0; c < D; ++c)
          dq[qoff + c * g.qcells + qc] = static_cast<T>(sc * acc[static_cast<std::size_t>(c)]);
      }
      for (Index c = 0; c < D; ++c)
        for (Index f = 0; f < g.fcells; ++f) {
          dkv[koff + c * g.fcells + f] += static_cast<T>(dkt[static_cast<std::size_t>(f * D + c)]);
          dkv[voff + c * g.fcells + f] += static_cast<T>(dvt[static_cast<std::size_t>(f * D + c)]);
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
