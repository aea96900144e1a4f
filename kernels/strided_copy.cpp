// Entry points of kernels/strided_copy.hpp: one per op, dispatched once on the device.
#include "kernels/strided_copy.hpp"

namespace tessera::kernels {

void strided_copy(const Device& dev, void* dst, const void* src, const StridedCopy& c,
                  std::size_t elem_size) {
  if (dev.is_host()) return cpu::strided_copy(dst, src, c, elem_size);
  if constexpr (kCudaEnabled) return cuda::strided_copy(dev, dst, src, c, elem_size);
  throw_without_cuda("strided_copy");
}

void strided_zero(const Device& dev, void* dst, const StridedCopy& c, std::size_t elem_size) {
  if (dev.is_host()) return cpu::strided_zero(dst, c, elem_size);
  if constexpr (kCudaEnabled) return cuda::strided_zero(dev, dst, c, elem_size);
  throw_without_cuda("strided_zero");
}

}  // namespace tessera::kernels
