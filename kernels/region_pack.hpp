#pragma once
// Packing many boxes of one strided buffer into (or out of) one contiguous message
// buffer in a single pass: the halo exchange packs all its regions with one call (one
// kernel launch on CUDA). Region r covers buffer elements [offset[r], offset[r+1]);
// element i of the buffer maps to a strided position in the tensor through the shared
// host/device arithmetic below.
#include "kernels/floor.hpp"
#include "kernels/device/device.hpp"
#include <cstddef>

#include "decomp/dtype.hpp"
#include "kernels/strided_index.hpp"

namespace tessera::kernels {

struct PackRegion {
  Index buffer_offset = 0;  // first buffer element of this region
  Index tensor_offset = 0;  // tensor element (in elements from the base) of the box origin
  StridedCopy box;          // shape and tensor strides (src_stride) of the box
};

// Region containing buffer element i: binary search over buffer offsets.
TESSERA_HD inline int region_of(const PackRegion* r, int n, Index i) {
  int lo = 0, hi = n - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (r[mid].buffer_offset <= i)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}
// Tensor element offset of buffer element i (the StridedCopy walk of its region).
TESSERA_HD inline Index tensor_offset_of(const PackRegion* r, int n, Index i) {
  const PackRegion& g = r[region_of(r, n, i)];
  Index src = 0, unused = 0;
  g.box.offsets(i - g.buffer_offset, src, unused);
  return g.tensor_offset + src;
}

enum class PackOp { Pack, Unpack, UnpackAdd };

// buffer[regions[0].buffer_offset, end) <-> the tensor boxes of `n` regions sorted by
// buffer offset. UnpackAdd adds buffer values into the tensor as `add`.
void region_pack(const Device& dev, void* tensor, void* buffer, const PackRegion* regions, int n,
                 Index end, std::size_t elem_size, PackOp op, DType add = DType::f32);

// The backends behind the entry points above (the entry dispatches on dev.space):
// host loops, oneDNN, OpenMP ...
namespace cpu {
void region_pack(void* tensor, void* buffer, const PackRegion* regions, int n, Index end,
                 std::size_t elem_size, PackOp op, DType add = DType::f32);
}  // namespace cpu
// ... and CUDA, defined only where Tessera is built with CUDA (kCudaEnabled): every pointer
// is a device pointer, work is queued on dev.stream, and a result returned to the host (a
// sum) is waited for.
namespace cuda {
void region_pack(const Device& dev, void* tensor, void* buffer, const PackRegion* regions, int n,
                 Index end, std::size_t elem_size, PackOp op, DType add = DType::f32);
}  // namespace cuda

}  // namespace tessera::kernels
