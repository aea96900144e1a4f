// CUDA attention through cuBLAS: for a chunk of query rows of every (batch x head) problem,
// the scores S = scale Q K^T are one strided-batched GEMM, a warp per row adds the bias,
// masks, and turns the row into probabilities and its log-sum-exp (in double), and O = P V
// is a second GEMM. Backward recomputes S from the saved LSE (FlashAttention-2's scheme)
// and forms dP = dO V^T, dS = P (dP - rowsum(dO O)), dQ = scale dS K, dK += scale dS^T Q,
// dV += P^T dO: five GEMMs and one row pass per chunk. Memory: two (B, rows, S_k) chunk
// buffers sized to kChunkBytes, never the whole S_q x S_k matrix. Float32 GEMMs run on FMA
// math (no TF32), so results match the host to float32 rounding.
#include <cmath>
#include <limits>

#include "decomp/error.hpp"
#include "kernels/attention.hpp"
#include "kernels/cuda/cublas_handle.hpp"
#include "kernels/cuda/device_loops.cuh"

namespace tessera::kernels {
namespace {

constexpr std::size_t kChunkBytes = std::size_t{256} << 20;  // per chunk buffer
constexpr unsigned kRowThreads = 256;                        // 8 warps, a row each

// The part of a problem's shape the row passes need, for query rows [r0, r0 + rows).
struct RowDims {
  Index batch, sq, sk, r0, rows, q_offset, k_offset, bias_stride;
  bool causal;
};

__device__ bool masked(const RowDims& p, Index i, Index j) {
  return p.causal && j + p.k_offset > i + p.q_offset;
}

__device__ double warp_max(double x) {
  for (int o = 16; o > 0; o /= 2) x = fmax(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}
__device__ double warp_sum(double x) {
  for (int o = 16; o > 0; o /= 2) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

// The biased, masked score of key j of a row whose scaled scores are `row`.
template <class T>
__device__ double biased(const RowDims& p, const T* row, const T* brow, Index i, Index j) {
  if (masked(p, i, j)) return -INFINITY;
  return static_cast<double>(row[j]) + (brow ? static_cast<double>(brow[j]) : 0.0);
}

// Scores -> probabilities in place, and each row's LSE (-inf and zeros: no visible key).
template <class T>
__global__ void softmax_rows_kernel(RowDims p, T* s, const T* bias, double* lse) {
  const Index w = (blockIdx.x * static_cast<Index>(blockDim.x) + threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x % 32);
  if (w >= p.batch * p.rows) return;  // whole warps leave together
  const Index b = w / p.rows, i = p.r0 + w % p.rows;
  T* row = s + w * p.sk;
  const T* brow = bias ? bias + b * p.bias_stride + i * p.sk : nullptr;
  double m = -INFINITY;
  for (Index j = lane; j < p.sk; j += 32) m = fmax(m, biased(p, row, brow, i, j));
  m = warp_max(m);
  double z = 0;
  if (m != -INFINITY)
    for (Index j = lane; j < p.sk; j += 32) z += exp(biased(p, row, brow, i, j) - m);
  z = warp_sum(z);
  const double l = m == -INFINITY ? -INFINITY : m + log(z);
  for (Index j = lane; j < p.sk; j += 32)
    row[j] = static_cast<T>(l == -INFINITY ? 0.0 : exp(biased(p, row, brow, i, j) - l));
  if (lane == 0) lse[b * p.sq + i] = l;
}

// Backward row pass: scores s -> P and dP g -> dS = P (dP - D_i), in place; dS to dbias.
template <class T>
__global__ void grad_rows_kernel(RowDims p, T* s, T* g, const T* bias, const double* lse,
                                 const double* di, T* dbias) {
  const Index w = (blockIdx.x * static_cast<Index>(blockDim.x) + threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x % 32);
  if (w >= p.batch * p.rows) return;
  const Index b = w / p.rows, i = p.r0 + w % p.rows, r = b * p.sq + i;
  T* srow = s + w * p.sk;
  T* grow = g + w * p.sk;
  const T* brow = bias ? bias + b * p.bias_stride + i * p.sk : nullptr;
  const double l = lse[r], d = di[r];
  for (Index j = lane; j < p.sk; j += 32) {
    const double pr = l == -INFINITY ? 0.0 : exp(biased(p, srow, brow, i, j) - l);
    const double ds = pr * (static_cast<double>(grow[j]) - d);
    srow[j] = static_cast<T>(pr);
    grow[j] = static_cast<T>(ds);
    if (dbias) dbias[r * p.sk + j] = static_cast<T>(ds);
  }
}

// D_i = rowsum(dO o O) of every row, in double.
template <class T>
__global__ void row_dots_kernel(Index rows, Index d, const T* a, const T* b, double* out) {
  const Index w = (blockIdx.x * static_cast<Index>(blockDim.x) + threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x % 32);
  if (w >= rows) return;
  double x = 0;
  for (Index e = lane; e < d; e += 32)
    x += static_cast<double>(a[w * d + e]) * static_cast<double>(b[w * d + e]);
  x = warp_sum(x);
  if (lane == 0) out[w] = x;
}

__global__ void fill_kernel(double* x, Index n, double v) {
  for (Index i = blockIdx.x * static_cast<Index>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<Index>(gridDim.x) * blockDim.x)
    x[i] = v;
}

unsigned warp_blocks(Index warps) {
  return cuda_blocks_for(warps * 32, kRowThreads);
}

int as_int(Index n, const char* what) {
  TESSERA_CHECK(n <= std::numeric_limits<int>::max(),
                "CUDA attention: " << what << " " << n << " exceeds cuBLAS's int range");
  return static_cast<int>(n);
}

// Column-major strided-batched GEMM C = alpha op(A) op(B) + beta C, over `batch`.
template <class T>
void gemm(cublasHandle_t h, bool ta, bool tb, Index m, Index n, Index k, double alpha, const T* A,
          Index lda, Index sa, const T* B, Index ldb, Index sb, double beta, T* C, Index ldc,
          Index sc, Index batch) {
  const cublasOperation_t oa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, ob = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  const T al = static_cast<T>(alpha), be = static_cast<T>(beta);
  cublasStatus_t st;
  if constexpr (std::is_same_v<T, double>)
    st = cublasDgemmStridedBatched(h, oa, ob, as_int(m, "rows"), as_int(n, "columns"),
                                   as_int(k, "inner"), &al, A, as_int(lda, "lda"), sa, B,
                                   as_int(ldb, "ldb"), sb, &be, C, as_int(ldc, "ldc"), sc,
                                   as_int(batch, "batch"));
  else
    st = cublasSgemmStridedBatched(h, oa, ob, as_int(m, "rows"), as_int(n, "columns"),
                                   as_int(k, "inner"), &al, A, as_int(lda, "lda"), sa, B,
                                   as_int(ldb, "ldb"), sb, &be, C, as_int(ldc, "ldc"), sc,
                                   as_int(batch, "batch"));
  cublas_check(st, "attention GEMM");
  device::count_launches(1);
}

// Query rows per chunk: a (B, rows, S_k) buffer within kChunkBytes, at least one row.
template <class T>
Index chunk_rows(const AttentionDesc& a) {
  const Index per_row = a.batch * a.sk * static_cast<Index>(sizeof(T));
  const Index r = static_cast<Index>(kChunkBytes) / std::max<Index>(per_row, 1);
  return std::max<Index>(1, std::min(r, a.sq));
}

RowDims row_dims(const AttentionDesc& a, Index r0, Index rows) {
  return {a.batch, a.sq, a.sk, r0, rows, a.q_offset, a.k_offset, a.bias_batch_stride, a.causal};
}

template <class T>
__global__ void merge_kernel(Index rows, Index d, T* out, double* lse, const T* out2,
                             const double* lse2) {
  const Index r = blockIdx.x * static_cast<Index>(blockDim.x) + threadIdx.x;
  if (r >= rows) return;
  const double l1 = lse[r], l2 = lse2[r];
  if (l2 == -INFINITY) return;
  T* o = out + r * d;
  const T* o2 = out2 + r * d;
  if (l1 == -INFINITY) {
    for (Index e = 0; e < d; ++e) o[e] = o2[e];
    lse[r] = l2;
    return;
  }
  const double mx = fmax(l1, l2), l = mx + log(exp(l1 - mx) + exp(l2 - mx));
  const double w1 = exp(l1 - l), w2 = exp(l2 - l);
  for (Index e = 0; e < d; ++e)
    o[e] = static_cast<T>(w1 * static_cast<double>(o[e]) + w2 * static_cast<double>(o2[e]));
  lse[r] = l;
}

template <class T>
void run_forward(const Device& dev, const AttentionDesc& a, const void* qv, const void* kv,
                 const void* vv, void* outv, double* lse) {
  const Index B = a.batch, sq = a.sq, sk = a.sk, d = a.d;
  if (B * sq == 0) return;
  const cudaStream_t st = stream_of(dev);
  auto* out = static_cast<T*>(outv);
  if (sk == 0) {  // no keys: zero output, LSE -inf
    TESSERA_CUDA_CHECK(
        cudaMemsetAsync(out, 0, static_cast<std::size_t>(B * sq * d) * sizeof(T), st));
    fill_kernel<<<cuda_blocks_for(B * sq, 256), 256, 0, st>>>(lse, B * sq, -INFINITY);
    check_launch("attention LSE fill");
    return;
  }
  const auto *q = static_cast<const T*>(qv), *k = static_cast<const T*>(kv),
             *v = static_cast<const T*>(vv);
  const Index R = chunk_rows<T>(a);
  DeviceScratch<T> s(static_cast<std::size_t>(B * R * sk));
  const cublasHandle_t h = cublas_for(dev);
  const double scale = a.effective_scale();
  for (Index r0 = 0; r0 < sq; r0 += R) {
    const Index rows = std::min(R, sq - r0);
    gemm<T>(h, true, false, sk, rows, d, scale, k, d, sk * d, q + r0 * d, d, sq * d, 0.0, s.get(),
            sk, rows * sk, B);
    softmax_rows_kernel<T><<<warp_blocks(B * rows), kRowThreads, 0, st>>>(
        row_dims(a, r0, rows), s.get(), static_cast<const T*>(a.bias), lse);
    check_launch("attention softmax rows");
    gemm<T>(h, false, false, d, rows, sk, 1.0, v, d, sk * d, s.get(), sk, rows * sk, 0.0,
            out + r0 * d, d, sq * d, B);
  }
}

template <class T>
void run_backward(const Device& dev, const AttentionDesc& a, const void* qv, const void* kv,
                  const void* vv, const void* outv, const void* doutv, const double* lse, void* dqv,
                  void* dkv, void* dvv, void* dbiasv) {
  const Index B = a.batch, sq = a.sq, sk = a.sk, d = a.d;
  const cudaStream_t st = stream_of(dev);
  auto *dq = static_cast<T*>(dqv), *dk = static_cast<T*>(dkv), *dv = static_cast<T*>(dvv);
  // dK and dV accumulate over the chunks of query rows.
  const std::size_t kv_bytes = static_cast<std::size_t>(B * sk * d) * sizeof(T);
  if (kv_bytes > 0) {
    TESSERA_CUDA_CHECK(cudaMemsetAsync(dk, 0, kv_bytes, st));
    TESSERA_CUDA_CHECK(cudaMemsetAsync(dv, 0, kv_bytes, st));
  }
  if (B * sq == 0) return;
  if (sk == 0) {
    TESSERA_CUDA_CHECK(
        cudaMemsetAsync(dq, 0, static_cast<std::size_t>(B * sq * d) * sizeof(T), st));
    return;
  }
  const auto *q = static_cast<const T*>(qv), *k = static_cast<const T*>(kv),
             *v = static_cast<const T*>(vv), *dout = static_cast<const T*>(doutv);
  DeviceScratch<double> di(static_cast<std::size_t>(B * sq));
  row_dots_kernel<T><<<warp_blocks(B * sq), kRowThreads, 0, st>>>(
      B * sq, d, dout, static_cast<const T*>(outv), di.get());
  check_launch("attention rowsum(dO O)");
  const Index R = chunk_rows<T>(a);
  DeviceScratch<T> s(static_cast<std::size_t>(B * R * sk)), g(static_cast<std::size_t>(B * R * sk));
  const cublasHandle_t h = cublas_for(dev);
  const double scale = a.effective_scale();
  for (Index r0 = 0; r0 < sq; r0 += R) {
    const Index rows = std::min(R, sq - r0);
    gemm<T>(h, true, false, sk, rows, d, scale, k, d, sk * d, q + r0 * d, d, sq * d, 0.0, s.get(),
            sk, rows * sk, B);  // S
    gemm<T>(h, true, false, sk, rows, d, 1.0, v, d, sk * d, dout + r0 * d, d, sq * d, 0.0, g.get(),
            sk, rows * sk, B);  // dP
    grad_rows_kernel<T><<<warp_blocks(B * rows), kRowThreads, 0, st>>>(
        row_dims(a, r0, rows), s.get(), g.get(), static_cast<const T*>(a.bias), lse, di.get(),
        static_cast<T*>(dbiasv));
    check_launch("attention gradient rows");
    gemm<T>(h, false, false, d, rows, sk, scale, k, d, sk * d, g.get(), sk, rows * sk, 0.0,
            dq + r0 * d, d, sq * d, B);  // dQ = scale dS K
    gemm<T>(h, false, true, d, sk, rows, scale, q + r0 * d, d, sq * d, g.get(), sk, rows * sk, 1.0,
            dk, d, sk * d, B);  // dK += scale dS^T Q
    gemm<T>(h, false, true, d, sk, rows, 1.0, dout + r0 * d, d, sq * d, s.get(), sk, rows * sk, 1.0,
            dv, d, sk * d, B);  // dV += P^T dO
  }
}

}  // namespace

void cuda::attention_forward(const Device& dev, const AttentionDesc& a, const void* q,
                             const void* k, const void* v, void* out, double* lse) {
  if (a.type == DType::f64) return run_forward<double>(dev, a, q, k, v, out, lse);
  run_forward<float>(dev, a, q, k, v, out, lse);
}

void cuda::attention_backward(const Device& dev, const AttentionDesc& a, const void* q,
                              const void* k, const void* v, const void* out, const void* dout,
                              const double* lse, void* dq, void* dk, void* dv, void* dbias) {
  if (a.type == DType::f64)
    return run_backward<double>(dev, a, q, k, v, out, dout, lse, dq, dk, dv, dbias);
  run_backward<float>(dev, a, q, k, v, out, dout, lse, dq, dk, dv, dbias);
}

void cuda::attention_merge(const Device& dev, DType t, Index batch, Index sq, Index d, void* out,
                           double* lse, const void* out2, const double* lse2) {
  const Index rows = batch * sq;
  if (t == DType::f64)
    merge_kernel<double><<<cuda_blocks_for(rows, 128), 128, 0, stream_of(dev)>>>(
        rows, d, static_cast<double*>(out), lse, static_cast<const double*>(out2), lse2);
  else
    merge_kernel<float><<<cuda_blocks_for(rows, 128), 128, 0, stream_of(dev)>>>(
        rows, d, static_cast<float*>(out), lse, static_cast<const float*>(out2), lse2);
  check_launch("attention merge");
}

}  // namespace tessera::kernels
