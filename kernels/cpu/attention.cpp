// Host attention: a row tile of queries against blocks of keys with the online softmax
// (forward), and the two gradient passes of FlashAttention-2 recomputing probabilities from
// the saved LSE - dq per row tile, dk and dv per key tile - so no thread writes another's
// rows and results do not depend on the thread count. Dot products vectorize over d.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/attention.hpp"

namespace tessera::kernels {
namespace {

constexpr Index kRowTile = 32, kKeyBlock = 128;
constexpr double kNegInf = -std::numeric_limits<double>::infinity();

template <class T>
inline double dot(const T* __restrict a, const T* __restrict b, Index d) {
  T s = 0;
#pragma omp simd reduction(+ : s)
  for (Index e = 0; e < d; ++e) s += a[e] * b[e];
  return static_cast<double>(s);
}

template <class T>
struct View {
  const AttentionDesc& a;
  const T *q, *k, *v, *bias;
  double scale;
  bool allowed(Index i, Index j) const { return !a.causal || j + a.k_offset <= i + a.q_offset; }
  // The score of query i and key j of problem b, or -inf where masked.
  double score(Index b, Index i, Index j) const {
    if (!allowed(i, j)) return kNegInf;
    double s = scale * dot(q + (b * a.sq + i) * a.d, k + (b * a.sk + j) * a.d, a.d);
    if (bias) s += static_cast<double>(bias[b * a.bias_batch_stride + i * a.sk + j]);
    return s;
  }
};

template <class T>
void forward(const AttentionDesc& a, const T* q, const T* k, const T* v, T* out, double* lse) {
  const View<T> w{a, q, k, v, static_cast<const T*>(a.bias), a.effective_scale()};
  const Index tiles = (a.sq + kRowTile - 1) / kRowTile;
#pragma omp parallel
  {
    std::vector<double> acc(static_cast<std::size_t>(kRowTile * a.d)), m(kRowTile), l(kRowTile);
    std::vector<double> s(static_cast<std::size_t>(kKeyBlock));
#pragma omp for collapse(2) schedule(dynamic)
    for (Index b = 0; b < a.batch; ++b)
      for (Index t = 0; t < tiles; ++t) {
        const Index i0 = t * kRowTile, i1 = std::min(a.sq, i0 + kRowTile);
        std::fill(acc.begin(), acc.end(), 0.0);
        std::fill(m.begin(), m.end(), kNegInf);
        std::fill(l.begin(), l.end(), 0.0);
        for (Index j0 = 0; j0 < a.sk; j0 += kKeyBlock) {
          const Index j1 = std::min(a.sk, j0 + kKeyBlock);
          for (Index i = i0; i < i1; ++i) {
            const std::size_t r = static_cast<std::size_t>(i - i0);
            double bm = kNegInf;
            for (Index j = j0; j < j1; ++j) {
              s[static_cast<std::size_t>(j - j0)] = w.score(b, i, j);
              bm = std::max(bm, s[static_cast<std::size_t>(j - j0)]);
            }
            if (bm == kNegInf) continue;  // every key of the block masked for this row
            const double mn = std::max(m[r], bm), c = std::exp(m[r] - mn);
            double* ar = acc.data() + r * static_cast<std::size_t>(a.d);
            l[r] *= c;
            for (Index e = 0; e < a.d; ++e) ar[e] *= c;
            for (Index j = j0; j < j1; ++j) {
              const double p = std::exp(s[static_cast<std::size_t>(j - j0)] - mn);
              if (p == 0) continue;
              l[r] += p;
              const T* vj = v + (b * a.sk + j) * a.d;
              for (Index e = 0; e < a.d; ++e) ar[e] += p * static_cast<double>(vj[e]);
            }
            m[r] = mn;
          }
        }
        for (Index i = i0; i < i1; ++i) {
          const std::size_t r = static_cast<std::size_t>(i - i0);
          T* o = out + (b * a.sq + i) * a.d;
          const double inv = l[r] > 0 ? 1.0 / l[r] : 0.0;
          for (Index e = 0; e < a.d; ++e)
            o[e] = static_cast<T>(
                acc[r * static_cast<std::size_t>(a.d) + static_cast<std::size_t>(e)] * inv);
          lse[b * a.sq + i] = l[r] > 0 ? m[r] + std::log(l[r]) : kNegInf;
        }
      }
  }
}

template <class T>
void backward(const AttentionDesc& a, const T* q, const T* k, const T* v, const T* out,
              const T* dout, const double* lse, T* dq, T* dk, T* dv, T* dbias) {
  const View<T> w{a, q, k, v, static_cast<const T*>(a.bias), a.effective_scale()};
  // D_i = <dout_i, out_i>: the softmax Jacobian's row term.
  std::vector<double> di(static_cast<std::size_t>(a.batch * a.sq));
#pragma omp parallel for schedule(static)
  for (Index r = 0; r < a.batch * a.sq; ++r)
    di[static_cast<std::size_t>(r)] = dot(dout + r * a.d, out + r * a.d, a.d);
    // dq (and dbias) by rows.
#pragma omp parallel for collapse(2) schedule(dynamic)
  for (Index b = 0; b < a.batch; ++b)
    for (Index i = 0; i < a.sq; ++i) {
      const Index r = b * a.sq + i;
      std::vector<double> g(static_cast<std::size_t>(a.d), 0.0);
      const double li = lse[r];
      for (Index j = 0; j < a.sk; ++j) {
        double ds = 0;
        if (li != kNegInf) {
          const double s = w.score(b, i, j);
          if (s != kNegInf) {
            const double p = std::exp(s - li);
            ds = p * (dot(dout + r * a.d, v + (b * a.sk + j) * a.d, a.d) -
                      di[static_cast<std::size_t>(r)]);
            const T* kj = k + (b * a.sk + j) * a.d;
            for (Index e = 0; e < a.d; ++e)
              g[static_cast<std::size_t>(e)] += ds * static_cast<double>(kj[e]);
          }
        }
        if (dbias) dbias[r * a.sk + j] = static_cast<T>(ds);
      }
      for (Index e = 0; e < a.d; ++e)
        dq[r * a.d + e] = static_cast<T>(w.scale * g[static_cast<std::size_t>(e)]);
    }
    // dk, dv by keys.
#pragma omp parallel for collapse(2) schedule(dynamic)
  for (Index b = 0; b < a.batch; ++b)
    for (Index j = 0; j < a.sk; ++j) {
      std::vector<double> gk(static_cast<std::size_t>(a.d), 0.0),
          gv(static_cast<std::size_t>(a.d), 0.0);
      for (Index i = 0; i < a.sq; ++i) {
        const Index r = b * a.sq + i;
        if (lse[r] == kNegInf) continue;
        const double s = w.score(b, i, j);
        if (s == kNegInf) continue;
        const double p = std::exp(s - lse[r]);
        const T* go = dout + r * a.d;
        const double ds =
            p * (dot(go, v + (b * a.sk + j) * a.d, a.d) - di[static_cast<std::size_t>(r)]);
        const T* qi = q + r * a.d;
        for (Index e = 0; e < a.d; ++e) {
          gv[static_cast<std::size_t>(e)] += p * static_cast<double>(go[e]);
          gk[static_cast<std::size_t>(e)] += ds * static_cast<double>(qi[e]);
        }
      }
      const Index c = (b * a.sk + j) * a.d;
      for (Index e = 0; e < a.d; ++e) {
        dk[c + e] = static_cast<T>(w.scale * gk[static_cast<std::size_t>(e)]);
        dv[c + e] = static_cast<T>(gv[static_cast<std::size_t>(e)]);
      }
    }
}

template <class T>
void merge(Index rows, Index d, T* out, double* lse, const T* out2, const double* lse2) {
#pragma omp parallel for schedule(static)
  for (Index r = 0; r < rows; ++r) {
    const double l1 = lse[r], l2 = lse2[r];
    if (l2 == kNegInf) continue;
    T* o = out + r * d;
    const T* o2 = out2 + r * d;
    if (l1 == kNegInf) {
      std::copy(o2, o2 + d, o);
      lse[r] = l2;
      continue;
    }
    const double mx = std::max(l1, l2);
    const double l = mx + std::log(std::exp(l1 - mx) + std::exp(l2 - mx));
    const double w1 = std::exp(l1 - l), w2 = std::exp(l2 - l);
    for (Index e = 0; e < d; ++e)
      o[e] = static_cast<T>(w1 * static_cast<double>(o[e]) + w2 * static_cast<double>(o2[e]));
    lse[r] = l;
  }
}

}  // namespace

void cpu::attention_forward(const AttentionDesc& a, const void* q, const void* k, const void* v,
                            void* out, double* lse) {
  if (a.type == DType::f64)
    return forward(a, static_cast<const double*>(q), static_cast<const double*>(k),
                   static_cast<const double*>(v), static_cast<double*>(out), lse);
  forward(a, static_cast<const float*>(q), static_cast<const float*>(k),
          static_cast<const float*>(v), static_cast<float*>(out), lse);
}

void cpu::attention_backward(const AttentionDesc& a, const void* q, const void* k, const void* v,
                             const void* out, const void* dout, const double* lse, void* dq,
                             void* dk, void* dv, void* dbias) {
  if (a.type == DType::f64)
    return backward(a, static_cast<const double*>(q), static_cast<const double*>(k),
                    static_cast<const double*>(v), static_cast<const double*>(out),
                    static_cast<const double*>(dout), lse, static_cast<double*>(dq),
                    static_cast<double*>(dk), static_cast<double*>(dv),
                    static_cast<double*>(dbias));
  backward(a, static_cast<const float*>(q), static_cast<const float*>(k),
           static_cast<const float*>(v), static_cast<const float*>(out),
           static_cast<const float*>(dout), lse, static_cast<float*>(dq), static_cast<float*>(dk),
           static_cast<float*>(dv), static_cast<float*>(dbias));
}

void cpu::attention_merge(DType t, Index batch, Index sq, Index d, void* out, double* lse,
                          const void* out2, const double* lse2) {
  if (t == DType::f64)
    return merge(batch * sq, d, static_cast<double*>(out), lse, static_cast<const double*>(out2),
                 lse2);
  merge(batch * sq, d, static_cast<float*>(out), lse, static_cast<const float*>(out2), lse2);
}

}  // namespace tessera::kernels
