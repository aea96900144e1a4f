#pragma once
// Per-channel bias of a contiguous (n, c, inner) tensor (inner = spatial volume):
// forward y[n, c, s] += b[c]; backward db[c] = sum over n and s of dy (overwritten).
#include "kernels/floor.hpp"
#include "kernels/device/device.hpp"
#include "decomp/box.hpp"
#include "decomp/dtype.hpp"

namespace tessera::kernels {

void bias_add(const Device& dev, DType type, Index n, Index c, Index inner, void* y, const void* b);
void bias_backward(const Device& dev, DType type, Index n, Index c, Index inner, const void* dy,
                   void* db);

// The backends behind the entry points above (the entry dispatches on dev.space):
// host loops, oneDNN, OpenMP ...
namespace cpu {
void bias_add(DType type, Index n, Index c, Index inner, void* y, const void* b);
void bias_backward(DType type, Index n, Index c, Index inner, const void* dy, void* db);
}  // namespace cpu
// ... and CUDA, defined only where Tessera is built with CUDA (kCudaEnabled): every pointer
// is a device pointer, work is queued on dev.stream, and a result returned to the host (a
// sum) is waited for.
namespace cuda {
void bias_add(const Device& dev, DType type, Index n, Index c, Index inner, void* y, const void* b);
void bias_backward(const Device& dev, DType type, Index n, Index c, Index inner, const void* dy,
                   void* db);
}  // namespace cuda

}  // namespace tessera::kernels
