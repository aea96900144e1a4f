// CUDA attention through cuBLAS: for a chunk of query rows of every (batch x head) problem,
// the scores S = scale Q K^T are one strided-batched GEMM, a warp per row adds the bias,
// masks, and turns the row into probabilities and its log-sum-exp (in double), and O = P V
// is a second GEMM. Backward recomputes S from the saved LSE (FlashAttention-2's scheme)
// and forms dP = dO V^T, dS = P (dP - rowsum(dO O)), dQ = scale dS K, dK += scale dS^T Q,
// dV += P^T dO: five GEMMs and one row pass per chunk. Memory: two (B, rows, S_k) chunk
// buffers sized to kChunkBytes, never the whole S_q x S_k matrix. Float32 GEMMs run on FMA
// math (no TF32), so results match the host to float32 rounding. bfloat16 (device only):
// bf16 storage, the GEMMs accumulate in float32 on tensor cores, the scores and dK, dV
// accumulate in float32 buffers, the row passes in double.
#include <cuda_bf16.h>
#include <library_types.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <optional>
#include <type_traits>

#include "decomp/error.hpp"
#include "kernels/attention.hpp"
#include "kernels/cuda/attention_common.cuh"
#include "kernels/cuda/attention_fused.hpp"
#include "kernels/cuda/cublas_handle.hpp"
#include "kernels/cuda/device_loops.cuh"

namespace tessera::kernels {
namespace {

using namespace attention_cuda;

template <class T>
constexpr cudaDataType_t cuda_type() {
  if constexpr (std::is_same_v<T, double>)
    return CUDA_R_64F;
  else if constexpr (std::is_same_v<T, float>)
    return CUDA_R_32F;
  else
    return CUDA_R_16BF;
}

constexpr std::size_t kChunkBytes = std::size_t{256} << 20;  // per chunk buffer
constexpr unsigned kRowThreads = 256;                        // 8 warps, a row each

// The part of a problem's shape the row passes need, for query rows [r0, r0 + rows).
struct RowDims {
  Index batch, sq, sk, r0, rows, q_offset, k_offset, bias_stride;
  bool causal;
};

__device__ bool masked(const RowDims& p, Index i, Index j) {
  return causal_hidden(p.causal, p.q_offset, p.k_offset, i, j);
}

// The biased, masked score of key j of a row whose scaled scores are `row`.
template <class A, class T>
__device__ double biased(const RowDims& p, const A* row, const T* brow, Index i, Index j) {
  if (masked(p, i, j)) return -INFINITY;
  return to_d(row[j]) + (brow ? to_d(brow[j]) : 0.0);
}

// exp(s - LSE): 0 where the key is masked (s = -inf) or the row sees none (LSE = -inf), NaN
// where the row has a NaN score and sees the key.
__device__ inline double probability(double s, double lse) {
  return lse == -INFINITY || s == -INFINITY ? 0.0 : exp(s - lse);
}

// Scores s (accumulation type A) -> probabilities p (storage type T; may be s itself), and
// each row's LSE (-inf and zeros: no visible key).
template <class T, class A>
__global__ void softmax_rows_kernel(RowDims p, const A* s, T* prob, const T* bias, double* lse) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  for (Index w = first_warp_row(); w < p.batch * p.rows; w += warp_row_stride()) {
    const Index b = w / p.rows, i = p.r0 + w % p.rows;
    const A* row = s + w * p.sk;
    T* prow = prob + w * p.sk;
    const T* brow = bias ? bias + b * p.bias_stride + i * p.sk : nullptr;
    double m = -INFINITY;
    bool nan = false;
    for (Index j = lane; j < p.sk; j += 32) {
      const double sj = biased(p, row, brow, i, j);
      m = fmax(m, sj);  // fmax drops a NaN: counted apart
      nan |= isnan(sj);
    }
    m = warp_max(m);
    const bool nan_row = __any_sync(0xffffffffu, nan);
    double z = 0;
    if (m != -INFINITY)
      for (Index j = lane; j < p.sk; j += 32) z += exp(biased(p, row, brow, i, j) - m);
    z = warp_sum(z);
    // A NaN score (q, k or the bias) makes the row NaN, as the host kernels and the whole-row
    // softmax do: its LSE propagates through merges, where -inf (no visible key) drops out.
    const double l = nan_row ? NAN : m == -INFINITY ? -INFINITY : m + log(z);
    for (Index j = lane; j < p.sk; j += 32)
      prow[j] = from_d<T>(probability(biased(p, row, brow, i, j), l));
    if (lane == 0) lse[b * p.sq + i] = l;
  }
}

// Backward row pass: scores s and dP g (type A) -> P and dS = P (dP - D_i) (type T; may
// be s and g themselves); dS also to dbias.
template <class T, class A>
__global__ void grad_rows_kernel(RowDims p, const A* s, const A* g, T* prob, T* ds_out,
                                 const T* bias, const double* lse, const double* di, T* dbias) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  for (Index w = first_warp_row(); w < p.batch * p.rows; w += warp_row_stride()) {
    const Index b = w / p.rows, i = p.r0 + w % p.rows, r = b * p.sq + i;
    const A* srow = s + w * p.sk;
    const A* grow = g + w * p.sk;
    T* prow = prob + w * p.sk;
    T* dsrow = ds_out + w * p.sk;
    const T* brow = bias ? bias + b * p.bias_stride + i * p.sk : nullptr;
    const double l = lse[r], d = di[r];
    for (Index j = lane; j < p.sk; j += 32) {
      const double pr = probability(biased(p, srow, brow, i, j), l);
      const double ds = pr * (to_d(grow[j]) - d);
      prow[j] = from_d<T>(pr);
      dsrow[j] = from_d<T>(ds);
      if (dbias) dbias[r * p.sk + j] = from_d<T>(ds);
    }
  }
}

__global__ void to_bf16_kernel(const float* x, __nv_bfloat16* y, Index n) {
  for (Index i = blockIdx.x * static_cast<Index>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<Index>(gridDim.x) * blockDim.x)
    y[i] = __float2bfloat16(x[i]);
}

unsigned warp_blocks(Index warps) {
  return cuda_blocks_for(warps * 32, kRowThreads);
}

int as_int(Index n, const char* what) {
  TESSERA_CHECK(n <= std::numeric_limits<int>::max(),
                "CUDA attention: " << what << " " << n << " exceeds cuBLAS's int range");
  return static_cast<int>(n);
}

// Column-major strided-batched GEMM C = alpha op(A) op(B) + beta C over `batch`, inputs of
// type In, C of type Out; float64 computes in float64, the others in float32 (FMA math:
// no TF32; bf16 inputs on tensor cores).
template <class In, class Out>
void gemm(cublasHandle_t h, bool ta, bool tb, Index m, Index n, Index k, double alpha, const In* A,
          Index lda, Index sa, const In* B, Index ldb, Index sb, double beta, Out* C, Index ldc,
          Index sc, Index batch) {
  const cublasOperation_t oa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, ob = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  constexpr bool dbl = std::is_same_v<In, double>;
  const float af = static_cast<float>(alpha), bf = static_cast<float>(beta);
  const void* al = dbl ? static_cast<const void*>(&alpha) : static_cast<const void*>(&af);
  const void* be = dbl ? static_cast<const void*>(&beta) : static_cast<const void*>(&bf);
  cublas_check(cublasGemmStridedBatchedEx(
                   h, oa, ob, as_int(m, "rows"), as_int(n, "columns"), as_int(k, "inner"), al, A,
                   cuda_type<In>(), as_int(lda, "lda"), sa, B, cuda_type<In>(), as_int(ldb, "ldb"),
                   sb, be, C, cuda_type<Out>(), as_int(ldc, "ldc"), sc, as_int(batch, "batch"),
                   dbl ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
               "attention GEMM");
  device::count_launches(1);
}

// Query rows per chunk: a (B, rows, S_k) buffer of `elem` bytes an entry within
// kChunkBytes (TESSERA_ATTENTION_CHUNK_BYTES overrides it: tests force many chunks), at
// least one row.
Index chunk_rows(const AttentionDesc& a, std::size_t elem) {
  std::size_t budget = kChunkBytes;
  if (const char* e = std::getenv("TESSERA_ATTENTION_CHUNK_BYTES")) {
    char* end = nullptr;
    budget = std::strtoull(e, &end, 10);
    TESSERA_CHECK(*e && !*end && budget > 0,
                  "TESSERA_ATTENTION_CHUNK_BYTES='" << e << "' is not a positive byte count");
  }
  const Index per_row = a.batch * a.sk * static_cast<Index>(elem);
  const Index r = static_cast<Index>(budget) / std::max<Index>(per_row, 1);
  return std::max<Index>(1, std::min(r, a.sq));
}

RowDims row_dims(const AttentionDesc& a, Index r0, Index rows) {
  return {a.batch, a.sq, a.sk, r0, rows, a.q_offset, a.k_offset, a.bias_batch_stride, a.causal};
}

template <class T>
__global__ void merge_kernel(Index rows, Index d, T* out, double* lse, const T* out2,
                             const double* lse2) {
  for (Index r = blockIdx.x * static_cast<Index>(blockDim.x) + threadIdx.x; r < rows;
       r += static_cast<Index>(gridDim.x) * blockDim.x) {
    const double l1 = lse[r], l2 = lse2[r];
    if (l2 == -INFINITY) continue;
    T* o = out + r * d;
    const T* o2 = out2 + r * d;
    if (l1 == -INFINITY) {
      for (Index e = 0; e < d; ++e) o[e] = o2[e];
      lse[r] = l2;
      continue;
    }
    const double mx = fmax(l1, l2), l = mx + log(exp(l1 - mx) + exp(l2 - mx));
    const double w1 = exp(l1 - l), w2 = exp(l2 - l);
    for (Index e = 0; e < d; ++e) o[e] = from_d<T>(w1 * to_d(o[e]) + w2 * to_d(o2[e]));
    lse[r] = l;
  }
}

// Scores of query rows [r0, r0 + rows) of every problem against all keys: C = alpha X_r Y^T,
// X (B, sq, d) and Y (B, sk, d) row-major, into a (B, rows, sk) chunk. S = scale Q K^T and
// dP = dO V^T alike.
template <class T, class A>
void chunk_products(cublasHandle_t h, const AttentionDesc& a, const T* x, const T* y, Index r0,
                    Index rows, double alpha, A* out) {
  gemm<T, A>(h, true, false, a.sk, rows, a.d, alpha, y, a.d, a.sk * a.d, x + r0 * a.d, a.d,
             a.sq * a.d, 0.0, out, a.sk, rows * a.sk, a.batch);
}

template <class T>
void run_forward(const Device& dev, const AttentionDesc& a, const void* qv, const void* kv,
                 const void* vv, void* outv, double* lse) {
  using A = typename AccOf<T>::type;
  constexpr bool same = std::is_same_v<T, A>;
  const Index B = a.batch, sq = a.sq, sk = a.sk, d = a.d;
  if (B * sq == 0) return;
  const cudaStream_t st = stream_of(dev);
  auto* out = static_cast<T*>(outv);
  if (sk == 0) {  // no keys: zero output, LSE -inf
    TESSERA_CUDA_CHECK(
        cudaMemsetAsync(out, 0, static_cast<std::size_t>(B * sq * d) * sizeof(T), st));
    fill_kernel<double><<<cuda_blocks_for(B * sq, 256), 256, 0, st>>>(lse, B * sq, -INFINITY);
    check_launch("attention LSE fill");
    return;
  }
  const auto *q = static_cast<const T*>(qv), *k = static_cast<const T*>(kv),
             *v = static_cast<const T*>(vv);
  const Index R = chunk_rows(a, sizeof(A) + (same ? 0 : sizeof(T)));
  const auto chunk = static_cast<std::size_t>(B * R * sk);
  DeviceScratch<A> s(chunk);
  std::optional<DeviceScratch<T>> pbuf;  // P in storage type where it differs from A
  if constexpr (!same) pbuf.emplace(chunk);
  T* prob = pbuf ? pbuf->get() : reinterpret_cast<T*>(s.get());
  const cublasHandle_t h = cublas_for(dev);
  const double scale = a.effective_scale();
  for (Index r0 = 0; r0 < sq; r0 += R) {
    const Index rows = std::min(R, sq - r0);
    chunk_products(h, a, q, k, r0, rows, scale, s.get());
    softmax_rows_kernel<T, A><<<warp_blocks(B * rows), kRowThreads, 0, st>>>(
        row_dims(a, r0, rows), s.get(), prob, static_cast<const T*>(a.bias), lse);
    check_launch("attention softmax rows");
    gemm<T, T>(h, false, false, d, rows, sk, 1.0, v, d, sk * d, prob, sk, rows * sk, 0.0,
               out + r0 * d, d, sq * d, B);
  }
}

template <class T>
void run_backward(const Device& dev, const AttentionDesc& a, const void* qv, const void* kv,
                  const void* vv, const void* outv, const void* doutv, const double* lse, void* dqv,
                  void* dkv, void* dvv, void* dbiasv) {
  using A = typename AccOf<T>::type;
  constexpr bool same = std::is_same_v<T, A>;
  const Index B = a.batch, sq = a.sq, sk = a.sk, d = a.d;
  const cudaStream_t st = stream_of(dev);
  auto *dq = static_cast<T*>(dqv), *dk = static_cast<T*>(dkv), *dv = static_cast<T*>(dvv);
  // dK and dV accumulate over the chunks of query rows, in A (float32 for bf16).
  const auto kv_count = static_cast<std::size_t>(B * sk * d);
  std::optional<DeviceScratch<A>> dk_acc, dv_acc;
  if constexpr (!same) dk_acc.emplace(kv_count), dv_acc.emplace(kv_count);
  A* dka = dk_acc ? dk_acc->get() : reinterpret_cast<A*>(dk);
  A* dva = dv_acc ? dv_acc->get() : reinterpret_cast<A*>(dv);
  if (kv_count > 0) {
    TESSERA_CUDA_CHECK(cudaMemsetAsync(dka, 0, kv_count * sizeof(A), st));
    TESSERA_CUDA_CHECK(cudaMemsetAsync(dva, 0, kv_count * sizeof(A), st));
  }
  auto finish = [&] {  // bf16: the float32 sums, rounded once
    if constexpr (!same) {
      if (kv_count == 0) return;
      const auto n = static_cast<Index>(kv_count);
      to_bf16_kernel<<<cuda_blocks_for(n, 256), 256, 0, st>>>(dka, dk, n);
      to_bf16_kernel<<<cuda_blocks_for(n, 256), 256, 0, st>>>(dva, dv, n);
      check_launch("attention dK dV to bf16", 2);
    }
  };
  if (B * sq == 0) return finish();
  if (sk == 0) {
    TESSERA_CUDA_CHECK(
        cudaMemsetAsync(dq, 0, static_cast<std::size_t>(B * sq * d) * sizeof(T), st));
    return finish();
  }
  const auto *q = static_cast<const T*>(qv), *k = static_cast<const T*>(kv),
             *v = static_cast<const T*>(vv), *dout = static_cast<const T*>(doutv);
  DeviceScratch<double> di(static_cast<std::size_t>(B * sq));
  row_dots_kernel<T><<<warp_blocks(B * sq), kRowThreads, 0, st>>>(
      B * sq, d, dout, static_cast<const T*>(outv), di.get());
  check_launch("attention rowsum(dO O)");
  const Index R = chunk_rows(a, 2 * (sizeof(A) + (same ? 0 : sizeof(T))));
  const auto chunk = static_cast<std::size_t>(B * R * sk);
  DeviceScratch<A> s(chunk), g(chunk);
  std::optional<DeviceScratch<T>> pbuf, dsbuf;
  if constexpr (!same) pbuf.emplace(chunk), dsbuf.emplace(chunk);
  T* prob = pbuf ? pbuf->get() : reinterpret_cast<T*>(s.get());
  T* ds = dsbuf ? dsbuf->get() : reinterpret_cast<T*>(g.get());
  const cublasHandle_t h = cublas_for(dev);
  const double scale = a.effective_scale();
  for (Index r0 = 0; r0 < sq; r0 += R) {
    const Index rows = std::min(R, sq - r0);
    chunk_products(h, a, q, k, r0, rows, scale, s.get());   // S
    chunk_products(h, a, dout, v, r0, rows, 1.0, g.get());  // dP
    grad_rows_kernel<T, A><<<warp_blocks(B * rows), kRowThreads, 0, st>>>(
        row_dims(a, r0, rows), s.get(), g.get(), prob, ds, static_cast<const T*>(a.bias), lse,
        di.get(), static_cast<T*>(dbiasv));
    check_launch("attention gradient rows");
    gemm<T, T>(h, false, false, d, rows, sk, scale, k, d, sk * d, ds, sk, rows * sk, 0.0,
               dq + r0 * d, d, sq * d, B);  // dQ = scale dS K
    gemm<T, A>(h, false, true, d, sk, rows, scale, q + r0 * d, d, sq * d, ds, sk, rows * sk, 1.0,
               dka, d, sk * d, B);  // dK += scale dS^T Q
    gemm<T, A>(h, false, true, d, sk, rows, 1.0, dout + r0 * d, d, sq * d, prob, sk, rows * sk, 1.0,
               dva, d, sk * d, B);  // dV += P^T dO
  }
  finish();
}

bool use_fused(const AttentionDesc& a) {
  return cuda_attention_path() == CudaAttentionPath::Fused && cuda::attention_fused_fits(a);
}

}  // namespace

void cuda::attention_forward(const Device& dev, const AttentionDesc& a, const void* q,
                             const void* k, const void* v, void* out, double* lse) {
  if (use_fused(a)) return cuda::attention_fused_forward(dev, a, q, k, v, out, lse);
  if (a.type == DType::f64) return run_forward<double>(dev, a, q, k, v, out, lse);
  if (a.type == DType::bf16) return run_forward<__nv_bfloat16>(dev, a, q, k, v, out, lse);
  run_forward<float>(dev, a, q, k, v, out, lse);
}

void cuda::attention_backward(const Device& dev, const AttentionDesc& a, const void* q,
                              const void* k, const void* v, const void* out, const void* dout,
                              const double* lse, void* dq, void* dk, void* dv, void* dbias) {
  if (use_fused(a))
    return cuda::attention_fused_backward(dev, a, q, k, v, out, dout, lse, dq, dk, dv, dbias);
  if (a.type == DType::f64)
    return run_backward<double>(dev, a, q, k, v, out, dout, lse, dq, dk, dv, dbias);
  if (a.type == DType::bf16)
    return run_backward<__nv_bfloat16>(dev, a, q, k, v, out, dout, lse, dq, dk, dv, dbias);
  run_backward<float>(dev, a, q, k, v, out, dout, lse, dq, dk, dv, dbias);
}

void cuda::attention_merge(const Device& dev, DType t, Index batch, Index sq, Index d, void* out,
                           double* lse, const void* out2, const double* lse2) {
  const Index rows = batch * sq;
  const unsigned blocks = cuda_blocks_for(rows, 128);
  const cudaStream_t st = stream_of(dev);
  if (t == DType::f64)
    merge_kernel<double><<<blocks, 128, 0, st>>>(rows, d, static_cast<double*>(out), lse,
                                                 static_cast<const double*>(out2), lse2);
  else if (t == DType::bf16)
    merge_kernel<__nv_bfloat16>
        <<<blocks, 128, 0, st>>>(rows, d, static_cast<__nv_bfloat16*>(out), lse,
                                 static_cast<const __nv_bfloat16*>(out2), lse2);
  else
    merge_kernel<float><<<blocks, 128, 0, st>>>(rows, d, static_cast<float*>(out), lse,
                                                static_cast<const float*>(out2), lse2);
  check_launch("attention merge");
}

}  // namespace tessera::kernels
