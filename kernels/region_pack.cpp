// Entry points of kernels/region_pack.hpp: one per op, dispatched once on the device.
#include "kernels/region_pack.hpp"

namespace tessera::kernels {

void region_pack(const Device& dev, void* tensor, void* buffer, const PackRegion* regions, int n,
                 Index end, std::size_t elem_size, PackOp op, DType add) {
  if (dev.is_host()) return cpu::region_pack(tensor, buffer, regions, n, end, elem_size, op, add);
  if constexpr (kCudaEnabled)
    return cuda::region_pack(dev, tensor, buffer, regions, n, end, elem_size, op, add);
  throw_without_cuda("region_pack");
}

}  // namespace tessera::kernels
