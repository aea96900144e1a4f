// Host attention. float64: a row tile of queries against blocks of keys with the online
// softmax (forward), and the two gradient passes of FlashAttention-2 recomputing the
// probabilities from the saved LSE - dq per row tile, dk and dv per key tile - so no thread
// writes another's rows. float32: the same algebra as matrix products (oneDNN matmul) per row
// tile against all keys, each problem on one thread. Results do not depend on the thread
// count.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "decomp/error.hpp"
#include "kernels/attention.hpp"
#include "kernels/cpu/simd_clones.hpp"
#include "kernels/cpu/tile_sgemm.hpp"
#include "kernels/device/scratch.hpp"

namespace tessera::kernels {
using cpu::tile_sgemm;
namespace {

constexpr Index kRowTile = 32, kKeyBlock = 128;
constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// 2^x in float32 for the softmax, whose scores the float32 path keeps in log2 units (the
// scale times log2 e folded into the score product): x = n + r with |r| <= 1/2, 2^r by
// Cephes' exp2f polynomial (relative error about 1.5e-7), 2^n from the exponent bits. x at or
// below -127 (masked keys: -inf) gives exactly 0 (n + 127 = 0 is the bit pattern of +0);
// a NaN stays a NaN.
inline float softmax_exp2(float x) {
  const float xc = x < -127.0f ? -127.0f : x;
  const float big = xc + 12582912.0f;  // 1.5 2^23: the low bits hold round(x)
  const float n = big - 12582912.0f;
  const float r = xc - n;
  float p = 1.535336188319500e-4f;
  p = p * r + 1.339887440266574e-3f;
  p = p * r + 9.618437357674640e-3f;
  p = p * r + 5.550332471162809e-2f;
  p = p * r + 2.402264791363012e-1f;
  p = p * r + 6.931472028550421e-1f;
  p = p * r + 1.0f;
  const std::int32_t bits = std::bit_cast<std::int32_t>(big) - 0x4B400000;  // round(x)
  return p * std::bit_cast<float>((bits + 127) << 23);
}

constexpr double kLog2e = 1.4426950408889634, kLn2 = 0.6931471805599453;

// A row's end of the online softmax from its maximum m and sum l (natural units): the factor
// of its output and its LSE. A NaN score anywhere in the row (a NaN in q, k or the bias) made
// l NaN, and so are its output and LSE, as in the whole-row softmax: a NaN LSE propagates
// through the merges of partial results, where a -inf one (no visible key: output 0) drops
// out of them.
inline double row_inverse(double l) {
  return l > 0 ? 1.0 / l : (std::isnan(l) ? l : 0.0);
}
inline double row_lse(double m, double l) {
  return l > 0 ? m + std::log(l) : (std::isnan(l) ? l : kNegInf);
}

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
            bool nan = false;
            for (Index j = j0; j < j1; ++j) {
              const double sj = w.score(b, i, j);
              s[static_cast<std::size_t>(j - j0)] = sj;
              bm = std::max(bm, sj);
              nan |= std::isnan(sj);
            }
            if (nan) l[r] = std::numeric_limits<double>::quiet_NaN();  // stays NaN: see below
            if (nan || bm == kNegInf) continue;  // or every key of the block masked for the row
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
          const double inv = row_inverse(l[r]);
          for (Index e = 0; e < a.d; ++e)
            o[e] = static_cast<T>(
                acc[r * static_cast<std::size_t>(a.d) + static_cast<std::size_t>(e)] * inv);
          lse[b * a.sq + i] = row_lse(m[r], l[r]);
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

// The float32 path's passes over rows of scores are built also for AVX-512 and AVX2
// (TESSERA_SIMD_CLONES); oneDNN's matmul kernels dispatch by CPU on
// their own.

// One key block of the online softmax, scores and maxima in log2 units: rows of scores ->
// 2^(s - m') in place, where m' is each row's running maximum updated by this block; c gets the
// factor 2^(m - m') that rescales the row's earlier sum and output (1 while a row has seen only
// masked keys), l the running sum.
TESSERA_SIMD_CLONES
void online_softmax_rows(float* s, Index rows, Index nk, double* m, double* l, float* c) {
  for (Index r = 0; r < rows; ++r) {
    float* row = s + r * nk;
    float bm = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : bm)
    for (Index j = 0; j < nk; ++j) bm = row[j] > bm ? row[j] : bm;
    const double mn = std::max(m[r], static_cast<double>(bm));
    if (mn == kNegInf) {  // every key so far masked (or NaN): nothing to add
      int nan = 0;
#pragma omp simd reduction(| : nan)
      for (Index j = 0; j < nk; ++j) nan |= row[j] != row[j];
      if (nan) l[r] = std::numeric_limits<double>::quiet_NaN();  // a NaN row stays NaN
      std::fill(row, row + nk, 0.0f);
      c[r] = 1.0f;
      continue;
    }
    c[r] = static_cast<float>(std::exp2(m[r] - mn));
    const float mf = static_cast<float>(mn);
    float sum = 0;  // a block's sum in float32 (16 lanes of at most 512 / 16 terms each)
#pragma omp simd reduction(+ : sum)
    for (Index j = 0; j < nk; ++j) {
      const float e = softmax_exp2(row[j] - mf);
      row[j] = e;
      sum += e;
    }
    l[r] = l[r] * static_cast<double>(c[r]) + static_cast<double>(sum);
    m[r] = mn;
  }
}

// Rows of scores (log2 units) -> probabilities 2^(s - LSE log2 e) in place, from the forward's
// (natural) LSE.
TESSERA_SIMD_CLONES
void probabilities_from_lse(float* s, Index rows, Index sk, const double* lse) {
  for (Index r = 0; r < rows; ++r) {
    float* row = s + r * sk;
    if (lse[r] == kNegInf) {
      std::fill(row, row + sk, 0.0f);
      continue;
    }
    if (std::isnan(lse[r])) {  // a NaN row: NaN where it sees a key, 0 where masked
      for (Index j = 0; j < sk; ++j)
        row[j] = row[j] == -std::numeric_limits<float>::infinity()
                     ? 0.0f
                     : std::numeric_limits<float>::quiet_NaN();
      continue;
    }
    // Scores minus the LSE are <= 0 up to rounding; the subtraction in float32 costs about
    // 1e-7 |score| of relative accuracy, as the forward's.
    const float lf = static_cast<float>(lse[r] * kLog2e);
#pragma omp simd
    for (Index j = 0; j < sk; ++j) row[j] = softmax_exp2(row[j] - lf);
  }
}

// dS = P (dP - D_i) in place of dP, row by row.
TESSERA_SIMD_CLONES
void softmax_grad_rows(float* dp, const float* p, Index rows, Index sk, const float* di) {
  for (Index r = 0; r < rows; ++r) {
    float* ds = dp + r * sk;
    const float* pr = p + r * sk;
    const float d = di[r];
#pragma omp simd
    for (Index j = 0; j < sk; ++j) ds[j] = pr[j] * (ds[j] - d);
  }
}

// float32: the blocks as matrix products through oneDNN (tile_sgemm, row-major), a row tile of
// queries against a block of keys at a time: S = scale log2(e) Q K^T (+ bias log2(e), masks;
// log2 units, so the softmax's exponentials are 2^x without a multiply each), the online
// softmax across key blocks (each row's running maximum and sum, O rescaled as it grows; the
// LSE kept), O = P V; backward, with the probabilities recomputed from the LSE (no rescaling),
// dP = dO V^T, dS = P (dP - D), dQ += scale dS K, dK += scale dS^T Q, dV += P^T dO. Each
// (batch x head) problem belongs to one thread, so dK and dV accumulate without races; memory
// per thread is two tiles of rows x key block, whatever the sequence length. Tiles: the larger
// the faster here (the products' efficiency), up to where they leave the caches.
constexpr Index kGemmRows = 128, kGemmKeys = 512;

// Keys per block for sk keys, and the elements of one tile of scores.
Index key_block(Index sk) {
  return std::max<Index>(1, std::min(sk, kGemmKeys));
}
std::size_t tile_elems(Index sk) {
  return static_cast<std::size_t>(kGemmRows * key_block(sk));
}

// Scores of rows [i0, i1) of problem b against keys [j0, j1), masked, into s (rows x (j1 - j0)).
void scores(const AttentionDesc& a, Index b, Index i0, Index i1, Index j0, Index j1, const float* q,
            const float* k, float* s) {
  const float sc = static_cast<float>(a.effective_scale() * kLog2e);
  const Index nk = j1 - j0;
  if (nk == 0 || i1 == i0) return;
  tile_sgemm('N', 'T', i1 - i0, nk, a.d, sc, q + (b * a.sq + i0) * a.d, a.d,
             k + (b * a.sk + j0) * a.d, a.d, 0.0f, s, nk);
  const auto* bias = static_cast<const float*>(a.bias);
  for (Index i = i0; i < i1; ++i) {
    float* row = s + (i - i0) * nk;
    if (bias) {
      const float* br = bias + b * a.bias_batch_stride + i * a.sk + j0;
#pragma omp simd
      for (Index j = 0; j < nk; ++j) row[j] += br[j] * static_cast<float>(kLog2e);
    }
    if (a.causal) {
      const Index first_hidden = std::max<Index>(j0, i + a.q_offset - a.k_offset + 1);
      for (Index j = first_hidden; j < j1; ++j)
        row[j - j0] = -std::numeric_limits<float>::infinity();
    }
  }
}

void forward_gemm(const AttentionDesc& a, const float* q, const float* k, const float* v,
                  float* out, double* lse) {
  const Index kb = key_block(a.sk);
  ThreadScratch<float> scratch(tile_elems(a.sk));
#pragma omp parallel
  {
    float* const s = scratch.mine();  // a tile's scores, then probabilities
    double m[kGemmRows], l[kGemmRows];
    float c[kGemmRows];
    // Row tiles are independent forward: one work unit each, so threads finish together.
    const Index tiles = (a.sq + kGemmRows - 1) / kGemmRows;
#pragma omp for schedule(dynamic)
    for (Index u = 0; u < a.batch * tiles; ++u) {
      const Index b = u / tiles, i0 = (u % tiles) * kGemmRows;
      const Index i1 = std::min(a.sq, i0 + kGemmRows), rows = i1 - i0;
      float* o = out + (b * a.sq + i0) * a.d;
      std::fill(o, o + rows * a.d, 0.0f);
      std::fill(m, m + rows, kNegInf);
      std::fill(l, l + rows, 0.0);
      for (Index j0 = 0; j0 < a.sk; j0 += kb) {
        const Index j1 = std::min(a.sk, j0 + kb), nk = j1 - j0;
        scores(a, b, i0, i1, j0, j1, q, k, s);
        online_softmax_rows(s, rows, nk, m, l, c);
        if (j0 > 0)  // the rows' earlier blocks, to the new maxima
          for (Index r = 0; r < rows; ++r)
            for (Index e = 0; e < a.d; ++e) o[r * a.d + e] *= c[r];
        tile_sgemm('N', 'N', rows, a.d, nk, 1.0f, s, nk, v + (b * a.sk + j0) * a.d, a.d,
                   j0 > 0 ? 1.0f : 0.0f, o, a.d);
      }
      for (Index r = 0; r < rows; ++r) {  // normalized once, d values per row
        const float inv = static_cast<float>(row_inverse(l[r]));
        for (Index e = 0; e < a.d; ++e) o[r * a.d + e] *= inv;
        lse[b * a.sq + i0 + r] = row_lse(m[r] * kLn2, l[r]);
      }
    }
  }
}

void backward_gemm(const AttentionDesc& a, const float* q, const float* k, const float* v,
                   const float* out, const float* dout, const double* lse, float* dq, float* dk,
                   float* dv, float* dbias) {
  const float sc = static_cast<float>(a.effective_scale());
  std::fill(dk, dk + a.batch * a.sk * a.d, 0.0f);
  std::fill(dv, dv + a.batch * a.sk * a.d, 0.0f);
  const Index kb = key_block(a.sk);
  const std::size_t tile = tile_elems(a.sk);
  ThreadScratch<float> scratch(2 * tile);  // p and dp of a tile
  // Rows go in bands of kBandTiles row tiles, and within a band each key block meets all
  // the band's tiles in turn: the block's K, V, dK and dV (4 x 128 KiB) stay in the cache
  // across the band instead of all of K, V, dK and dV streaming once per row tile (at
  // S = 16384 that is 16 MiB per tile and thread, the whole L3 for two threads). The sums
  // into dQ (over key blocks) and dK, dV (over row tiles) keep their order: same bits.
  constexpr Index kBandTiles = 8;
#pragma omp parallel
  {
    float* const p = scratch.mine();
    float* const dp = p + tile;
    float di[kBandTiles * kGemmRows];
#pragma omp for schedule(dynamic)
    for (Index b = 0; b < a.batch; ++b)
      for (Index band0 = 0; band0 < a.sq; band0 += kBandTiles * kGemmRows) {
        const Index band1 = std::min(a.sq, band0 + kBandTiles * kGemmRows);
        if (a.sk == 0) {
          std::fill(dq + (b * a.sq + band0) * a.d, dq + (b * a.sq + band1) * a.d, 0.0f);
          continue;
        }
        for (Index i = band0; i < band1; ++i) {
          const Index r = b * a.sq + i;
          di[i - band0] = static_cast<float>(dot(dout + r * a.d, out + r * a.d, a.d));
        }
        for (Index j0 = 0; j0 < a.sk; j0 += kb) {
          const Index j1 = std::min(a.sk, j0 + kb), nk = j1 - j0;
          const float* vb = v + (b * a.sk + j0) * a.d;
          for (Index i0 = band0; i0 < band1; i0 += kGemmRows) {
            const Index i1 = std::min(band1, i0 + kGemmRows), rows = i1 - i0;
            float* dqt = dq + (b * a.sq + i0) * a.d;
            const float* go = dout + (b * a.sq + i0) * a.d;
            scores(a, b, i0, i1, j0, j1, q, k, p);
            probabilities_from_lse(p, rows, nk, lse + b * a.sq + i0);
            tile_sgemm('N', 'T', rows, nk, a.d, 1.0f, go, a.d, vb, a.d, 0.0f, dp, nk);
            softmax_grad_rows(dp, p, rows, nk, di + (i0 - band0));
            if (dbias)
              for (Index i = i0; i < i1; ++i)
                std::copy(dp + (i - i0) * nk, dp + (i - i0 + 1) * nk,
                          dbias + (b * a.sq + i) * a.sk + j0);
            tile_sgemm('N', 'N', rows, a.d, nk, sc, dp, nk, k + (b * a.sk + j0) * a.d, a.d,
                       j0 > 0 ? 1.0f : 0.0f, dqt, a.d);
            tile_sgemm('T', 'N', nk, a.d, rows, sc, dp, nk, q + (b * a.sq + i0) * a.d, a.d, 1.0f,
                       dk + (b * a.sk + j0) * a.d, a.d);
            tile_sgemm('T', 'N', nk, a.d, rows, 1.0f, p, nk, go, a.d, 1.0f,
                       dv + (b * a.sk + j0) * a.d, a.d);
          }
        }
      }
  }
}

}  // namespace

std::size_t attention_host_scratch_bytes(DType t, Index sk) {
  if (t != DType::f32) return 0;
  return 2 * tile_elems(sk) * sizeof(float);  // backward's p and dp
}

void cpu::attention_forward(const AttentionDesc& a, const void* q, const void* k, const void* v,
                            void* out, double* lse) {
  if (a.type == DType::f64)
    return forward(a, static_cast<const double*>(q), static_cast<const double*>(k),
                   static_cast<const double*>(v), static_cast<double*>(out), lse);
  forward_gemm(a, static_cast<const float*>(q), static_cast<const float*>(k),
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
  backward_gemm(a, static_cast<const float*>(q), static_cast<const float*>(k),
                static_cast<const float*>(v), static_cast<const float*>(out),
                static_cast<const float*>(dout), lse, static_cast<float*>(dq),
                static_cast<float*>(dk), static_cast<float*>(dv), static_cast<float*>(dbias));
}

void cpu::attention_merge(DType t, Index batch, Index sq, Index d, void* out, double* lse,
                          const void* out2, const double* lse2) {
  if (t == DType::f64)
    return merge(batch * sq, d, static_cast<double*>(out), lse, static_cast<const double*>(out2),
                 lse2);
  merge(batch * sq, d, static_cast<float*>(out), lse, static_cast<const float*>(out2), lse2);
}

}  // namespace tessera::kernels
