#pragma once
// Scaled dot-product attention over (B, S, D) blocks (B = batch x heads), the local
// building block of sequence-sharded attention: forward returns the output and the
// per-row log-sum-exp (LSE), so partial results over different key blocks merge exactly
// (attention_merge); backward recomputes the probabilities from the saved LSE
// (FlashAttention-2's scheme: O(S) memory, no S x S matrix kept). Optional additive bias
// (masks are -inf entries) and a causal rule on global positions, so a block of queries
// against a block of keys of a longer sequence (a ring step) masks correctly.
//
// Host: OpenMP over (B, row tiles) forward and for dq, over (B, key tiles) for dk and dv -
// no atomics, results independent of the thread count; rows with no allowed key give 0
// and an LSE of -inf. CUDA (kernels/cuda/attention.cu): per chunk of query rows, cuBLAS
// strided-batched GEMMs for the products and a warp per row for the softmax and gradient
// passes; float32, float64 and bfloat16 (device only: bf16 storage, float32 accumulation).
#include "kernels/floor.hpp"
#include "decomp/dtype.hpp"
#include "decomp/index.hpp"
#include "kernels/device/device.hpp"

namespace tessera::kernels {

struct AttentionDesc {
  Index batch = 1;       // B: independent (batch x head) problems
  Index sq = 0, sk = 0;  // query and key rows
  Index d = 0;           // head dim (q, k and v alike)
  double scale = 0;      // 0: 1/sqrt(d)
  // Causal: key j may be seen by query i iff j + k_offset <= i + q_offset (global positions
  // of the blocks' first rows).
  bool causal = false;
  Index q_offset = 0, k_offset = 0;
  // Additive bias (B or 1, sq, sk) of the data type, or null; bias_batch_stride 0
  // broadcasts one (sq, sk) block over the batch.
  const void* bias = nullptr;
  Index bias_batch_stride = 0;
  DType type = DType::f32;  // f32 or f64; bf16 on a device
  double effective_scale() const;
};

// q (B, sq, d), k and v (B, sk, d) -> out (B, sq, d), lse (B, sq) float64.
void attention_forward(const Device& dev, const AttentionDesc& a, const void* q, const void* k,
                       const void* v, void* out, double* lse);
// Gradients from dout (B, sq, d) and forward's out and lse: dq (B, sq, d), dk and dv
// (B, sk, d) overwritten; dbias (like bias, not broadcast: (B, sq, sk)) if not null.
void attention_backward(const Device& dev, const AttentionDesc& a, const void* q, const void* k,
                        const void* v, const void* out, const void* dout, const double* lse,
                        void* dq, void* dk, void* dv, void* dbias = nullptr);
// Tracked scratch the host kernels hold per thread at their peak (backward) for keys of
// length sk: the float32 path's two tiles of scores; float64's few rows are not counted.
std::size_t attention_host_scratch_bytes(DType t, Index sk);

// The CUDA local kernel: Gemm (cuBLAS products per chunk of query rows, a warp per row for the
// softmax and gradient passes) or Fused (FlashAttention-2, one kernel per pass on CUDA cores,
// no chunk buffers; head dims up to 128, wider ones take Gemm). TESSERA_ATTENTION_KERNEL=
// gemm|fused sets the first value; the host ignores it.
enum class CudaAttentionPath { Gemm, Fused };
CudaAttentionPath cuda_attention_path();
void set_cuda_attention_path(CudaAttentionPath p);

// Merges a partial result (out2, lse2) over other keys into (out, lse), in place:
// lse = log(e^lse + e^lse2), out = e^(lse_old - lse) out + e^(lse2 - lse) out2.
void attention_merge(const Device& dev, DType t, Index batch, Index sq, Index d, void* out,
                     double* lse, const void* out2, const double* lse2);

namespace cpu {
void attention_forward(const AttentionDesc& a, const void* q, const void* k, const void* v,
                       void* out, double* lse);
void attention_backward(const AttentionDesc& a, const void* q, const void* k, const void* v,
                        const void* out, const void* dout, const double* lse, void* dq, void* dk,
                        void* dv, void* dbias);
void attention_merge(DType t, Index batch, Index sq, Index d, void* out, double* lse,
                     const void* out2, const double* lse2);
}  // namespace cpu
namespace cuda {
void attention_forward(const Device& dev, const AttentionDesc& a, const void* q, const void* k,
                       const void* v, void* out, double* lse);
void attention_backward(const Device& dev, const AttentionDesc& a, const void* q, const void* k,
                        const void* v, const void* out, const void* dout, const double* lse,
                        void* dq, void* dk, void* dv, void* dbias);
void attention_merge(const Device& dev, DType t, Index batch, Index sq, Index d, void* out,
                     double* lse, const void* out2, const double* lse2);
}  // namespace cuda

}  // namespace tessera::kernels
