// Entry points of kernels/attention.hpp: one per op, dispatched once on the device.
#include "kernels/attention.hpp"

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <string>

#include "decomp/error.hpp"
#include "kernels/env_choice.hpp"

namespace tessera::kernels {

double AttentionDesc::effective_scale() const {
  return scale != 0 ? scale : 1.0 / std::sqrt(static_cast<double>(d));
}

namespace {
std::atomic<int>& path_slot() {
  static std::atomic<int> p{env_choice("TESSERA_ATTENTION_KERNEL", {"gemm", "fused"})};
  return p;
}

// float32 and float64 everywhere; bfloat16 on a device (bf16 storage, float32 sums).
void check_type(const Device& dev, DType t, const char* what) {
  TESSERA_CHECK(t == DType::f32 || t == DType::f64 || (t == DType::bf16 && !dev.is_host()),
                what << " takes float32 or float64"
                     << (t == DType::bf16 ? " on the host (bfloat16 runs on a CUDA device)" : "")
                     << ", not " << name_of(t));
}

bool check(const Device& dev, const AttentionDesc& a, const char* what) {
  check_type(dev, a.type, what);
  TESSERA_CHECK(a.batch >= 0 && a.sq >= 0 && a.sk >= 0 && a.d >= 1,
                what << ": bad shape (batch " << a.batch << ", sq " << a.sq << ", sk " << a.sk
                     << ", d " << a.d << ")");
  TESSERA_CHECK(a.bias_batch_stride >= 0, what << ": negative bias batch stride");
  return a.batch * a.sq > 0 || a.batch * a.sk > 0;
}
}  // namespace

CudaAttentionPath cuda_attention_path() {
  return static_cast<CudaAttentionPath>(path_slot().load());
}
void set_cuda_attention_path(CudaAttentionPath p) {
  path_slot().store(static_cast<int>(p));
}

void attention_forward(const Device& dev, const AttentionDesc& a, const void* q, const void* k,
                       const void* v, void* out, double* lse) {
  if (!check(dev, a, "attention_forward")) return;
  if (dev.is_host()) return cpu::attention_forward(a, q, k, v, out, lse);
  if constexpr (kCudaEnabled) return cuda::attention_forward(dev, a, q, k, v, out, lse);
  throw_without_cuda("attention_forward");
}

void attention_backward(const Device& dev, const AttentionDesc& a, const void* q, const void* k,
                        const void* v, const void* out, const void* dout, const double* lse,
                        void* dq, void* dk, void* dv, void* dbias) {
  if (!check(dev, a, "attention_backward")) return;
  if (dev.is_host()) return cpu::attention_backward(a, q, k, v, out, dout, lse, dq, dk, dv, dbias);
  if constexpr (kCudaEnabled)
    return cuda::attention_backward(dev, a, q, k, v, out, dout, lse, dq, dk, dv, dbias);
  throw_without_cuda("attention_backward");
}

void attention_merge(const Device& dev, DType t, Index batch, Index sq, Index d, void* out,
                     double* lse, const void* out2, const double* lse2) {
  check_type(dev, t, "attention_merge");
  if (batch * sq == 0) return;
  if (dev.is_host()) return cpu::attention_merge(t, batch, sq, d, out, lse, out2, lse2);
  if constexpr (kCudaEnabled)
    return cuda::attention_merge(dev, t, batch, sq, d, out, lse, out2, lse2);
  throw_without_cuda("attention_merge");
}

}  // namespace tessera::kernels
