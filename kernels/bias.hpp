#pragma once
// Per-channel bias of a contiguous (n, c, inner) tensor (inner = spatial volume):
// forward y[n, c, s] += b[c]; backward db[c] = sum over n and s of dy (overwritten).
#include "kernels/floor.hpp"
#include "decomp/box.hpp"
#include "decomp/dtype.hpp"

namespace tessera::kernels {

void bias_add_cpu(DType type, Index n, Index c, Index inner, void* y, const void* b);
void bias_backward_cpu(DType type, Index n, Index c, Index inner, const void* dy, void* db);

// CUDA versions: device pointers, one kernel launch, synchronous on the default stream.
void bias_add_cuda(DType type, Index n, Index c, Index inner, void* y, const void* b);
void bias_backward_cuda(DType type, Index n, Index c, Index inner, const void* dy, void* db);

}  // namespace tessera::kernels
