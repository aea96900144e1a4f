// CUDA attention: one thread per query row (forward with the online softmax, accumulating
// in the output row; dq and dbias) or per key row (dk, dv), the same arithmetic as the host
// (kernels/cpu/attention.cpp) in double. A first, exact version; tiled shared-memory
// kernels are the next step for speed.
#include <cmath>

#include "kernels/attention.hpp"
#include "kernels/cuda/device_loops.cuh"

namespace tessera::kernels {
namespace {

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

template <class T>
__device__ double score(const Dims& p, const T* q, const T* k, const T* bias, Index b, Index i,
                        Index j) {
  if (p.causal && j + p.k_offset > i + p.q_offset) return -INFINITY;
  double s = 0;
  const T* qi = q + (b * p.sq + i) * p.d;
  const T* kj = k + (b * p.sk + j) * p.d;
  for (Index e = 0; e < p.d; ++e) s += static_cast<double>(qi[e]) * static_cast<double>(kj[e]);
  s *= p.scale;
  if (bias) s += static_cast<double>(bias[b * p.bias_stride + i * p.sk + j]);
  return s;
}

template <class T>
__global__ void forward_kernel(Dims p, const T* q, const T* k, const T* v, const T* bias, T* out,
                               double* lse) {
  const Index r = blockIdx.x * static_cast<Index>(blockDim.x) + threadIdx.x;
  if (r >= p.batch * p.sq) return;
  const Index b = r / p.sq, i = r % p.sq;
  T* o = out + r * p.d;
  for (Index e = 0; e < p.d; ++e) o[e] = 0;
  double m = -INFINITY, l = 0;
  for (Index j = 0; j < p.sk; ++j) {
    const double s = score(p, q, k, bias, b, i, j);
    if (s == -INFINITY) continue;
    const double mn = fmax(m, s), c = exp(m - mn), w = exp(s - mn);
    const T* vj = v + (b * p.sk + j) * p.d;
    for (Index e = 0; e < p.d; ++e)
      o[e] = static_cast<T>(static_cast<double>(o[e]) * c + w * static_cast<double>(vj[e]));
    l = l * c + w;
    m = mn;
  }
  const double inv = l > 0 ? 1.0 / l : 0.0;
  for (Index e = 0; e < p.d; ++e) o[e] = static_cast<T>(static_cast<double>(o[e]) * inv);
  lse[r] = l > 0 ? m + log(l) : -INFINITY;
}

template <class T>
__device__ double row_dot(const T* a, const T* b, Index d) {
  double s = 0;
  for (Index e = 0; e < d; ++e) s += static_cast<double>(a[e]) * static_cast<double>(b[e]);
  return s;
}

template <class T>
__global__ void dq_kernel(Dims p, const T* q, const T* k, const T* v, const T* bias, const T* out,
                          const T* dout, const double* lse, T* dq, T* dbias) {
  const Index r = blockIdx.x * static_cast<Index>(blockDim.x) + threadIdx.x;
  if (r >= p.batch * p.sq) return;
  const Index b = r / p.sq, i = r % p.sq;
  const double di = row_dot(dout + r * p.d, out + r * p.d, p.d);
  T* g = dq + r * p.d;
  for (Index e = 0; e < p.d; ++e) g[e] = 0;
  for (Index j = 0; j < p.sk; ++j) {
    double ds = 0;
    const double s = lse[r] == -INFINITY ? -INFINITY : score(p, q, k, bias, b, i, j);
    if (s != -INFINITY) {
      const double pr = exp(s - lse[r]);
      ds = pr * (row_dot(dout + r * p.d, v + (b * p.sk + j) * p.d, p.d) - di);
      const T* kj = k + (b * p.sk + j) * p.d;
      for (Index e = 0; e < p.d; ++e)
        g[e] =
            static_cast<T>(static_cast<double>(g[e]) + p.scale * ds * static_cast<double>(kj[e]));
    }
    if (dbias) dbias[r * p.sk + j] = static_cast<T>(ds);
  }
}

template <class T>
__global__ void dkv_kernel(Dims p, const T* q, const T* k, const T* v, const T* bias, const T* out,
                           const T* dout, const double* lse, T* dk, T* dv) {
  const Index c = blockIdx.x * static_cast<Index>(blockDim.x) + threadIdx.x;
  if (c >= p.batch * p.sk) return;
  const Index b = c / p.sk, j = c % p.sk;
  T* gk = dk + c * p.d;
  T* gv = dv + c * p.d;
  for (Index e = 0; e < p.d; ++e) gk[e] = gv[e] = 0;
  for (Index i = 0; i < p.sq; ++i) {
    const Index r = b * p.sq + i;
    if (lse[r] == -INFINITY) continue;
    const double s = score(p, q, k, bias, b, i, j);
    if (s == -INFINITY) continue;
    const double pr = exp(s - lse[r]);
    const T* go = dout + r * p.d;
    const double di = row_dot(go, out + r * p.d, p.d);
    const double ds = pr * (row_dot(go, v + c * p.d, p.d) - di);
    const T* qi = q + r * p.d;
    for (Index e = 0; e < p.d; ++e) {
      gv[e] = static_cast<T>(static_cast<double>(gv[e]) + pr * static_cast<double>(go[e]));
      gk[e] =
          static_cast<T>(static_cast<double>(gk[e]) + p.scale * ds * static_cast<double>(qi[e]));
    }
  }
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
void run_forward(const Device& dev, const AttentionDesc& a, const void* q, const void* k,
                 const void* v, void* out, double* lse) {
  const Index rows = a.batch * a.sq;
  if (rows == 0) return;
  forward_kernel<T><<<cuda_blocks_for(rows, 128), 128, 0, stream_of(dev)>>>(
      dims_of(a), static_cast<const T*>(q), static_cast<const T*>(k), static_cast<const T*>(v),
      static_cast<const T*>(a.bias), static_cast<T*>(out), lse);
  check_launch("attention forward");
}

template <class T>
void run_backward(const Device& dev, const AttentionDesc& a, const void* q, const void* k,
                  const void* v, const void* out, const void* dout, const double* lse, void* dq,
                  void* dk, void* dv, void* dbias) {
  const Dims p = dims_of(a);
  const auto* bias = static_cast<const T*>(a.bias);
  if (a.batch * a.sq > 0) {
    dq_kernel<T><<<cuda_blocks_for(a.batch * a.sq, 128), 128, 0, stream_of(dev)>>>(
        p, static_cast<const T*>(q), static_cast<const T*>(k), static_cast<const T*>(v), bias,
        static_cast<const T*>(out), static_cast<const T*>(dout), lse, static_cast<T*>(dq),
        static_cast<T*>(dbias));
    check_launch("attention dq");
  }
  if (a.batch * a.sk > 0) {
    dkv_kernel<T><<<cuda_blocks_for(a.batch * a.sk, 128), 128, 0, stream_of(dev)>>>(
        p, static_cast<const T*>(q), static_cast<const T*>(k), static_cast<const T*>(v), bias,
        static_cast<const T*>(out), static_cast<const T*>(dout), lse, static_cast<T*>(dk),
        static_cast<T*>(dv));
    check_launch("attention dk dv");
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
