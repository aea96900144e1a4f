#pragma once
// The fused CUDA attention (kernels/cuda/attention_fused.cu): FlashAttention-2 in one kernel
// per pass, taken instead of the cuBLAS path when cuda_attention_path() is Fused and the head
// dim fits (d <= 128, and the tiles in the device's shared memory).
#include "kernels/attention.hpp"

namespace tessera::kernels::cuda {

bool attention_fused_fits(const AttentionDesc& a);  // on the current device
void attention_fused_forward(const Device& dev, const AttentionDesc& a, const void* q,
                             const void* k, const void* v, void* out, double* lse);
void attention_fused_backward(const Device& dev, const AttentionDesc& a, const void* q,
                              const void* k, const void* v, const void* out, const void* dout,
                              const double* lse, void* dq, void* dk, void* dv, void* dbias);

}  // namespace tessera::kernels::cuda
