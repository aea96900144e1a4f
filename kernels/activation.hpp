#pragma once
// Pointwise activations on n contiguous elements: forward y = f(x) (y may alias x) and
// backward dx = dy * f'(x) (dx may alias dy). GELU is the exact erf form.
#include "kernels/floor.hpp"
#include "decomp/box.hpp"
#include "decomp/dtype.hpp"

namespace tessera::kernels {

enum class Activation { ReLU, GELU, SiLU, Tanh };

const char* name_of(Activation a);

void activation_forward_cpu(Activation a, DType type, Index n, const void* x, void* y);
void activation_backward_cpu(Activation a, DType type, Index n, const void* x, const void* dy,
                             void* dx);

// CUDA versions: device pointers, one kernel launch, synchronous on the default stream.
void activation_forward_cuda(Activation a, DType type, Index n, const void* x, void* y);
void activation_backward_cuda(Activation a, DType type, Index n, const void* x, const void* dy,
                              void* dx);

}  // namespace tessera::kernels
