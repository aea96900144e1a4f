// Entry points of kernels/optim_update.hpp: one per op, dispatched once on the device.
#include "kernels/optim_update.hpp"

namespace tessera::kernels {

void sgd_update(const Device& dev, DType s, Count n, void* p, const void* g, void* buf,
                const SgdArgs& a) {
  if (dev.is_host()) return cpu::sgd_update(s, n, p, g, buf, a);
  if constexpr (kCudaEnabled) return cuda::sgd_update(dev, s, n, p, g, buf, a);
  throw_without_cuda("sgd_update");
}

void adam_update(const Device& dev, DType s, Count n, void* p, const void* g, void* m, void* v,
                 const AdamArgs& a) {
  if (dev.is_host()) return cpu::adam_update(s, n, p, g, m, v, a);
  if constexpr (kCudaEnabled) return cuda::adam_update(dev, s, n, p, g, m, v, a);
  throw_without_cuda("adam_update");
}

}  // namespace tessera::kernels
