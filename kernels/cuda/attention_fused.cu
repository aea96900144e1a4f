// FlashAttention-2 on CUDA cores, one kernel per pass, no (rows x keys) buffer at all: a
// block takes a tile of 32 query rows (forward, dQ) or 32 keys (dK, dV) of one problem and
// walks the other side's tiles through shared memory. Forward keeps each row's running
// maximum, sum and output in registers (the online softmax) and writes the output and LSE
// once. Backward is two kernels so no sum needs an atomic (results do not depend on the
// schedule, as on the host): per key tile, dV = P^T dO and dK = scale dS^T Q over the query
// tiles; per query tile, dQ = scale dS K over the key tiles; both recompute P from the LSE
// and dS = P (dP - D_i), dP = dO V^T (FlashAttention-2's deterministic variant: two more
// products than one pass with atomics). Scores and sums in float for float32 and bf16
// (storage only), in double for float64. Head dims up to 128 (a tile's rows in shared memory,
// padded to 32, 64 or 128); causal tiles wholly hidden are skipped.
#include "kernels/cuda/attention_fused.hpp"

#include <cuda_bf16.h>

#include <cmath>
#include <limits>

#include "decomp/error.hpp"
#include "kernels/cuda/attention_common.cuh"
#include "kernels/cuda/device_loops.cuh"

namespace tessera::kernels {
namespace {

using namespace attention_cuda;

constexpr int kTile = 32;                           // query rows and keys per tile
constexpr int kThreads = 128;                       // 4 warps
constexpr int kWarpRows = kTile / (kThreads / 32);  // a warp's rows of a tile
constexpr int kMaxD = 128;

struct Dims {
  Index batch, sq, sk, d, q_offset, k_offset, bias_stride;
  bool causal;
  double scale;
};

Dims dims_of(const AttentionDesc& a) {
  return {a.batch,
          a.sq,
          a.sk,
          a.d,
          a.q_offset,
          a.k_offset,
          a.bias_batch_stride,
          a.causal,
          a.effective_scale()};
}

__host__ __device__ Index tiles(Index n) {
  return (n + kTile - 1) / kTile;
}

// Keys [0, end) any row of the query tile at i0 may see (all where not causal).
__host__ __device__ Index keys_seen(const Dims& p, Index i0) {
  if (!p.causal) return p.sk;
  const Index last = (i0 + kTile < p.sq ? i0 + kTile : p.sq) - 1;
  const Index end = last + p.q_offset - p.k_offset + 1;
  return end < 0 ? 0 : (end < p.sk ? end : p.sk);
}

// The first query tile with a row that may see key j0 (0 where not causal).
__device__ Index first_query_tile(const Dims& p, Index j0) {
  if (!p.causal) return 0;
  const Index first = j0 + p.k_offset - p.q_offset;
  if (first <= 0) return 0;
  return first < p.sq ? first / kTile * kTile : p.sq;
}

// Rows [r0, r0 + kTile) of x (B, n, d), problem b, into s (row stride ld) in type A, zeros past
// the rows and the head dim.
template <class T, class A, int D>
__device__ void load_tile(A* s, int ld, const T* x, Index b, Index n, Index d, Index r0) {
  for (int idx = threadIdx.x; idx < kTile * D; idx += kThreads) {
    const int r = idx / D, e = idx % D;
    const Index row = r0 + r;
    s[r * ld + e] = row < n && e < d ? static_cast<A>(to_d(x[(b * n + row) * d + e])) : A(0);
  }
}

template <class A, int D>
__device__ A dot(const A* x, const A* y) {
  A s = 0;
#pragma unroll 8
  for (int e = 0; e < D; ++e) s += x[e] * y[e];
  return s;
}

// The scaled, biased score of query i and key j from their rows in shared memory, or -inf
// (masked, or past the block's rows).
template <class T, class A, int D>
__device__ A score(const Dims& p, const T* bias, Index b, Index i, Index j, const A* qrow,
                   const A* krow) {
  if (i >= p.sq || j >= p.sk || causal_hidden(p.causal, p.q_offset, p.k_offset, i, j))
    return -INFINITY;
  A s = dot<A, D>(qrow, krow) * static_cast<A>(p.scale);
  if (bias) s += static_cast<A>(to_d(bias[b * p.bias_stride + i * p.sk + j]));
  return s;
}

template <class A, int D>
constexpr std::size_t forward_smem() {
  return sizeof(A) * (kTile * D + 2 * kTile * (D + 1) + kTile * kTile);
}

template <class T, class A, int D>
__global__ void __launch_bounds__(kThreads)
    fused_forward_kernel(Dims p, const T* q, const T* k, const T* v, const T* bias, T* out,
                         double* lse) {
  extern __shared__ __align__(16) unsigned char smem[];
  A* qs = reinterpret_cast<A*>(smem);  // the query tile, kTile x D
  A* ks = qs + kTile * D;              // the key tile, kTile x (D + 1): lanes read rows
  A* vs = ks + kTile * (D + 1);        // the value tile, kTile x (D + 1)
  A* ps = vs + kTile * (D + 1);        // probabilities, a row per query
  const Index nt = tiles(p.sq);
  const Index b = blockIdx.x / nt, i0 = blockIdx.x % nt * kTile;
  const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
  load_tile<T, A, D>(qs, D, q, b, p.sq, p.d, i0);
  // Indexed only by unrolled loops, so these stay in registers (not local memory).
  A m[kWarpRows], l[kWarpRows], o[kWarpRows][D / 32];
#pragma unroll
  for (int r = 0; r < kWarpRows; ++r) {
    m[r] = -INFINITY;
    l[r] = 0;
#pragma unroll
    for (int t = 0; t < D / 32; ++t) o[r][t] = 0;
  }
  const Index j_end = keys_seen(p, i0);
  for (Index j0 = 0; j0 < j_end; j0 += kTile) {
    __syncthreads();  // the last tile's keys used up (and the queries loaded)
    load_tile<T, A, D>(ks, D + 1, k, b, p.sk, p.d, j0);
    load_tile<T, A, D>(vs, D + 1, v, b, p.sk, p.d, j0);
    __syncthreads();
#pragma unroll
    for (int r = 0; r < kWarpRows; ++r) {  // lane = key: the row's scores, online softmax
      const int rt = warp * kWarpRows + r;
      const A s = score<T, A, D>(p, bias, b, i0 + rt, j0 + lane, qs + rt * D, ks + lane * (D + 1));
      const A mn = fmax(m[r], warp_max(s));  // fmax drops a NaN: counted apart
      const bool nan_row = __any_sync(0xffffffffu, isnan(s));
      A pr = 0, c = 1;
      if (mn != -INFINITY) {  // exp(-inf) = 0 for masked keys and a first visible block
        c = exp(m[r] - mn);
        pr = exp(s - mn);
      }
      const A sum = warp_sum(pr);
      l[r] = nan_row ? A(NAN) : l[r] * c + sum;  // a NaN row stays NaN (NaN c = NaN)
      m[r] = mn;
      ps[rt * kTile + lane] = pr;
#pragma unroll
      for (int t = 0; t < D / 32; ++t) o[r][t] *= c;
    }
    __syncwarp();
#pragma unroll
    for (int r = 0; r < kWarpRows; ++r) {  // lane = column: O += P V
      const int rt = warp * kWarpRows + r;
      for (int jj = 0; jj < kTile; ++jj) {
        const A pj = ps[rt * kTile + jj];
#pragma unroll
        for (int t = 0; t < D / 32; ++t) o[r][t] += pj * vs[jj * (D + 1) + lane + 32 * t];
      }
    }
  }
#pragma unroll
  for (int r = 0; r < kWarpRows; ++r) {
    const Index i = i0 + warp * kWarpRows + r;
    if (i >= p.sq) break;
    // A NaN row (a NaN score of q, k or the bias) gives NaN output and LSE, as on the host.
    const A inv = l[r] > 0 ? A(1) / l[r] : isnan(l[r]) ? l[r] : A(0);
#pragma unroll
    for (int t = 0; t < D / 32; ++t) {
      const Index e = lane + 32 * t;
      if (e < p.d) out[(b * p.sq + i) * p.d + e] = from_d<T>(to_d(o[r][t] * inv));
    }
    if (lane == 0)
      lse[b * p.sq + i] = l[r] > 0      ? to_d(m[r]) + log(to_d(l[r]))
                          : isnan(l[r]) ? to_d(l[r])
                                        : -INFINITY;
  }
}

// Backward, the warp's rows of a query tile (qs, gs = dO, their LSE and D_i) against a key
// tile (ks, vs), lane = key: P into ps (if given), dS = P (dP - D_i) into dss (row stride
// kTile + 1), and dS to dbias (if given).
template <class T, class A, int D>
__device__ void tile_grads(const Dims& p, const T* bias, T* dbias, Index b, Index i0, Index j0,
                           const A* qs, const A* gs, const A* ks, const A* vs, const double* lse_s,
                           const A* di_s, A* ps, A* dss) {
  const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
  const Index j = j0 + lane;
#pragma unroll
  for (int r = 0; r < kWarpRows; ++r) {
    const int rt = warp * kWarpRows + r;
    const Index i = i0 + rt;
    A pr = 0, ds = 0;
    if (lse_s[rt] != -INFINITY) {  // rows past the block have -inf too
      const A s = score<T, A, D>(p, bias, b, i, j, qs + rt * D, ks + lane * (D + 1));
      if (s != -INFINITY) {
        pr = exp(s - static_cast<A>(lse_s[rt]));
        ds = pr * (dot<A, D>(gs + rt * D, vs + lane * (D + 1)) - di_s[rt]);
      }
    }
    if (ps) ps[rt * (kTile + 1) + lane] = pr;
    dss[rt * (kTile + 1) + lane] = ds;
    if (dbias && i < p.sq && j < p.sk) dbias[(b * p.sq + i) * p.sk + j] = from_d<T>(to_d(ds));
  }
}

// A query tile's LSE and D_i into shared memory (-inf and 0 past the rows).
template <class A>
__device__ void load_row_terms(const Dims& p, Index b, Index i0, const double* lse,
                               const double* di, double* lse_s, A* di_s) {
  for (int r = threadIdx.x; r < kTile; r += kThreads) {
    const Index i = i0 + r;
    lse_s[r] = i < p.sq ? lse[b * p.sq + i] : -INFINITY;
    di_s[r] = i < p.sq ? static_cast<A>(di[b * p.sq + i]) : A(0);
  }
}

// Backward shared memory: the row terms (double first, for alignment), two tiles of rows
// (kTile x D), two of keys (kTile x (D + 1)), two of P / dS (kTile x (kTile + 1)).
template <class A, int D>
constexpr std::size_t backward_smem() {
  return sizeof(double) * kTile +
         sizeof(A) * (kTile + 2 * kTile * D + 2 * kTile * (D + 1) + 2 * kTile * (kTile + 1));
}

template <class A, int D>
struct BackwardSmem {
  double* lse_s;
  A *di_s, *qs, *gs, *ks, *vs, *ps, *dss;
  __device__ explicit BackwardSmem(unsigned char* base) {
    lse_s = reinterpret_cast<double*>(base);
    di_s = reinterpret_cast<A*>(lse_s + kTile);
    qs = di_s + kTile;
    gs = qs + kTile * D;
    ks = gs + kTile * D;
    vs = ks + kTile * (D + 1);
    ps = vs + kTile * (D + 1);
    dss = ps + kTile * (kTile + 1);
  }
};

// Per key tile: dK = scale dS^T Q and dV = P^T dO over the query tiles; thread = (key jt,
// columns e0, e0 + 4, ...). Writes dS to dbias (zeroed before where causal, for the tiles skipped).
template <class T, class A, int D>
__global__ void __launch_bounds__(kThreads)
    fused_dkdv_kernel(Dims p, const T* q, const T* k, const T* v, const T* dout, const T* bias,
                      const double* lse, const double* di, T* dk, T* dv, T* dbias) {
  extern __shared__ __align__(16) unsigned char smem[];
  const BackwardSmem<A, D> s(smem);
  const Index nt = tiles(p.sk);
  const Index b = blockIdx.x / nt, j0 = blockIdx.x % nt * kTile;
  const int jt = static_cast<int>(threadIdx.x % 32), e0 = static_cast<int>(threadIdx.x / 32);
  load_tile<T, A, D>(s.ks, D + 1, k, b, p.sk, p.d, j0);
  load_tile<T, A, D>(s.vs, D + 1, v, b, p.sk, p.d, j0);
  A gk[D / 4], gv[D / 4];
#pragma unroll
  for (int t = 0; t < D / 4; ++t) gk[t] = gv[t] = 0;
  for (Index i0 = first_query_tile(p, j0); i0 < p.sq; i0 += kTile) {
    __syncthreads();  // the last query tile used up
    load_tile<T, A, D>(s.qs, D, q, b, p.sq, p.d, i0);
    load_tile<T, A, D>(s.gs, D, dout, b, p.sq, p.d, i0);
    load_row_terms<A>(p, b, i0, lse, di, s.lse_s, s.di_s);
    __syncthreads();
    tile_grads<T, A, D>(p, bias, dbias, b, i0, j0, s.qs, s.gs, s.ks, s.vs, s.lse_s, s.di_s, s.ps,
                        s.dss);
    __syncthreads();
    for (int rt = 0; rt < kTile; ++rt) {
      const A pr = s.ps[rt * (kTile + 1) + jt], ds = s.dss[rt * (kTile + 1) + jt];
#pragma unroll
      for (int t = 0; t < D / 4; ++t) {
        const int e = e0 + 4 * t;
        gv[t] += pr * s.gs[rt * D + e];
        gk[t] += ds * s.qs[rt * D + e];
      }
    }
  }
  const Index j = j0 + jt;
  if (j >= p.sk) return;
#pragma unroll
  for (int t = 0; t < D / 4; ++t) {
    const Index e = e0 + 4 * t;
    if (e >= p.d) continue;
    dk[(b * p.sk + j) * p.d + e] = from_d<T>(p.scale * to_d(gk[t]));
    dv[(b * p.sk + j) * p.d + e] = from_d<T>(to_d(gv[t]));
  }
}

// Per query tile: dQ = scale dS K over the key tiles; thread = (row it, columns e0, e0 + 4,
// ...).
template <class T, class A, int D>
__global__ void __launch_bounds__(kThreads)
    fused_dq_kernel(Dims p, const T* q, const T* k, const T* v, const T* dout, const T* bias,
                    const double* lse, const double* di, T* dq) {
  extern __shared__ __align__(16) unsigned char smem[];
  const BackwardSmem<A, D> s(smem);
  const Index nt = tiles(p.sq);
  const Index b = blockIdx.x / nt, i0 = blockIdx.x % nt * kTile;
  const int it = static_cast<int>(threadIdx.x % 32), e0 = static_cast<int>(threadIdx.x / 32);
  load_tile<T, A, D>(s.qs, D, q, b, p.sq, p.d, i0);
  load_tile<T, A, D>(s.gs, D, dout, b, p.sq, p.d, i0);
  load_row_terms<A>(p, b, i0, lse, di, s.lse_s, s.di_s);
  A gq[D / 4];
#pragma unroll
  for (int t = 0; t < D / 4; ++t) gq[t] = 0;
  const Index j_end = keys_seen(p, i0);
  for (Index j0 = 0; j0 < j_end; j0 += kTile) {
    __syncthreads();  // the last key tile used up (and the queries loaded)
    load_tile<T, A, D>(s.ks, D + 1, k, b, p.sk, p.d, j0);
    load_tile<T, A, D>(s.vs, D + 1, v, b, p.sk, p.d, j0);
    __syncthreads();
    tile_grads<T, A, D>(p, bias, nullptr, b, i0, j0, s.qs, s.gs, s.ks, s.vs, s.lse_s, s.di_s,
                        nullptr, s.dss);
    __syncthreads();
    for (int jj = 0; jj < kTile; ++jj) {
      const A ds = s.dss[it * (kTile + 1) + jj];
#pragma unroll
      for (int t = 0; t < D / 4; ++t) gq[t] += ds * s.ks[jj * (D + 1) + e0 + 4 * t];
    }
  }
  const Index i = i0 + it;
  if (i >= p.sq) return;
#pragma unroll
  for (int t = 0; t < D / 4; ++t) {
    const Index e = e0 + 4 * t;
    if (e < p.d) dq[(b * p.sq + i) * p.d + e] = from_d<T>(p.scale * to_d(gq[t]));
  }
}

// The padded head dim of d (0: too wide for the fused kernels).
int padded_dim(Index d) {
  return d <= 32 ? 32 : d <= 64 ? 64 : d <= kMaxD ? 128 : 0;
}

std::size_t shared_bytes_needed(DType t, int D) {
  const bool dbl = t == DType::f64;
  switch (D) {
    case 32:
      return dbl ? backward_smem<double, 32>() : backward_smem<float, 32>();
    case 64:
      return dbl ? backward_smem<double, 64>() : backward_smem<float, 64>();
    default:
      return dbl ? backward_smem<double, 128>() : backward_smem<float, 128>();
  }
}

unsigned grid_of(Index blocks) {
  TESSERA_CHECK(blocks <= std::numeric_limits<int>::max(),
                "fused CUDA attention: " << blocks << " tiles exceed the grid's range");
  return static_cast<unsigned>(blocks);
}

// Opts a kernel into more than the default 48 KiB of dynamic shared memory where it needs it.
template <class K>
void allow_shared(K kernel, std::size_t bytes) {
  if (bytes > (std::size_t{48} << 10))
    TESSERA_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            static_cast<int>(bytes)));
}

template <class T, int D>
void forward(const Device& dev, const AttentionDesc& a, const void* q, const void* k, const void* v,
             void* out, double* lse) {
  using A = typename AccOf<T>::type;
  const Index blocks = a.batch * tiles(a.sq);
  if (blocks == 0) return;
  constexpr std::size_t smem = forward_smem<A, D>();
  allow_shared(fused_forward_kernel<T, A, D>, smem);
  // The float64 128-wide instantiation spills a few bytes to local memory (ptxas -v).
  launch_with_room("fused attention forward", [&] {
    fused_forward_kernel<T, A, D><<<grid_of(blocks), kThreads, smem, stream_of(dev)>>>(
        dims_of(a), static_cast<const T*>(q), static_cast<const T*>(k), static_cast<const T*>(v),
        static_cast<const T*>(a.bias), static_cast<T*>(out), lse);
  });
}

template <class T, int D>
void backward(const Device& dev, const AttentionDesc& a, const void* qv, const void* kv,
              const void* vv, const void* outv, const void* doutv, const double* lse, void* dqv,
              void* dkv, void* dvv, void* dbiasv) {
  using A = typename AccOf<T>::type;
  const cudaStream_t st = stream_of(dev);
  const Dims p = dims_of(a);
  const auto *q = static_cast<const T*>(qv), *k = static_cast<const T*>(kv),
             *v = static_cast<const T*>(vv), *dout = static_cast<const T*>(doutv),
             *bias = static_cast<const T*>(a.bias);
  auto *dq = static_cast<T*>(dqv), *dk = static_cast<T*>(dkv), *dv = static_cast<T*>(dvv),
       *dbias = static_cast<T*>(dbiasv);
  DeviceScratch<double> di(static_cast<std::size_t>(a.batch * a.sq));
  if (a.batch * a.sq > 0) {
    row_dots_kernel<T><<<cuda_blocks_for(a.batch * a.sq * 32, 256), 256, 0, st>>>(
        a.batch * a.sq, a.d, dout, static_cast<const T*>(outv), di.get());
    check_launch("fused attention rowsum(dO O)");
  }
  // Causally skipped tile pairs are the only dbias entries the kernels do not write.
  if (dbias && a.causal && a.batch * a.sq * a.sk > 0)
    TESSERA_CUDA_CHECK(
        cudaMemsetAsync(dbias, 0, static_cast<std::size_t>(a.batch * a.sq * a.sk) * sizeof(T), st));
  constexpr std::size_t smem = backward_smem<A, D>();
  if (const Index blocks = a.batch * tiles(a.sk); blocks > 0) {
    allow_shared(fused_dkdv_kernel<T, A, D>, smem);
    fused_dkdv_kernel<T, A, D><<<grid_of(blocks), kThreads, smem, st>>>(p, q, k, v, dout, bias, lse,
                                                                        di.get(), dk, dv, dbias);
    check_launch("fused attention dK dV");
  }
  if (const Index blocks = a.batch * tiles(a.sq); blocks > 0) {
    allow_shared(fused_dq_kernel<T, A, D>, smem);
    fused_dq_kernel<T, A, D>
        <<<grid_of(blocks), kThreads, smem, st>>>(p, q, k, v, dout, bias, lse, di.get(), dq);
    check_launch("fused attention dQ");
  }
}

// Calls f.template operator()<T, D>() for the type and padded head dim of a.
template <class F>
void dispatch(const AttentionDesc& a, F&& f) {
  const int D = padded_dim(a.d);
  auto by_dim = [&]<class T>() {
    if (D == 32) return f.template operator()<T, 32>();
    if (D == 64) return f.template operator()<T, 64>();
    return f.template operator()<T, 128>();
  };
  if (a.type == DType::f64) return by_dim.template operator()<double>();
  if (a.type == DType::bf16) return by_dim.template operator()<__nv_bfloat16>();
  by_dim.template operator()<float>();
}

}  // namespace

bool cuda::attention_fused_fits(const AttentionDesc& a) {
  const int D = padded_dim(a.d);
  if (D == 0) return false;
  int device = 0, optin = 0;
  TESSERA_CUDA_CHECK(cudaGetDevice(&device));
  TESSERA_CUDA_CHECK(
      cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  return shared_bytes_needed(a.type, D) <= static_cast<std::size_t>(optin);
}

void cuda::attention_fused_forward(const Device& dev, const AttentionDesc& a, const void* q,
                                   const void* k, const void* v, void* out, double* lse) {
  dispatch(a, [&]<class T, int D>() { forward<T, D>(dev, a, q, k, v, out, lse); });
}

void cuda::attention_fused_backward(const Device& dev, const AttentionDesc& a, const void* q,
                                    const void* k, const void* v, const void* out, const void* dout,
                                    const double* lse, void* dq, void* dk, void* dv, void* dbias) {
  dispatch(a, [&]<class T, int D>() {
    backward<T, D>(dev, a, q, k, v, out, dout, lse, dq, dk, dv, dbias);
  });
}

}  // namespace tessera::kernels
