// Entry points of kernels/bias.hpp: one per op, dispatched once on the device.
#include "kernels/bias.hpp"

namespace tessera::kernels {

void bias_add(const Device& dev, DType type, Index n, Index c, Index inner, void* y,
              const void* b) {
  if (dev.is_host()) return cpu::bias_add(type, n, c, inner, y, b);
  if constexpr (kCudaEnabled) return cuda::bias_add(dev, type, n, c, inner, y, b);
  throw_without_cuda("bias_add");
}

void bias_backward(const Device& dev, DType type, Index n, Index c, Index inner, const void* dy,
                   void* db) {
  if (dev.is_host()) return cpu::bias_backward(type, n, c, inner, dy, db);
  if constexpr (kCudaEnabled) return cuda::bias_backward(dev, type, n, c, inner, dy, db);
  throw_without_cuda("bias_backward");
}

}  // namespace tessera::kernels
