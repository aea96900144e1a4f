// CUDA entry points of kernels/strided_copy.hpp for builds without CUDA.
#include "decomp/error.hpp"
#include "kernels/strided_copy.hpp"

namespace tessera::kernels {

void strided_copy_cuda(void*, const void*, const StridedCopy&, std::size_t) {
  throw Error("strided_copy_cuda: Tessera was built without CUDA (TESSERA_CUDA=OFF)");
}
void strided_zero_cuda(void*, const StridedCopy&, std::size_t) {
  throw Error("strided_zero_cuda: Tessera was built without CUDA (TESSERA_CUDA=OFF)");
}

}  // namespace tessera::kernels

#include "kernels/region_pack.hpp"

namespace tessera::kernels {
void region_pack_cuda(void*, void*, const PackRegion*, int, Index, std::size_t, PackOp, DType) {
  throw Error("region_pack_cuda: Tessera was built without CUDA (TESSERA_CUDA=OFF)");
}
}  // namespace tessera::kernels
