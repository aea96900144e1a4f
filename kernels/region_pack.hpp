#pragma once
// Packing many boxes of one strided buffer into (or out of) one contiguous message
// buffer in a single pass: the halo exchange packs all its regions with one call (one
// kernel launch on CUDA). Region r covers buffer elements [offset[r], offset[r+1]);
// element i of the buffer maps to a strided position in the tensor through the shared
// host/device arithmetic below.
#include <cstddef>
#include <vector>

#include "kernels/strided_index.hpp"

namespace tessera::kernels {

struct PackRegion {
  Index buffer_offset = 0;  // first buffer element of this region
  Index tensor_offset = 0;  // tensor element (in elements from the base) of the box origin
  StridedCopy box;          // shape and tensor strides of the box (dst_stride unused)
};

// Region containing buffer element i: binary search over buffer offsets.
TESSERA_HD inline int region_of(const PackRegion* r, int n, Index i) {
  int lo = 0, hi = n - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (r[mid].buffer_offset <= i) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}
// Tensor element offset of buffer element i.
TESSERA_HD inline Index tensor_offset_of(const PackRegion* r, int n, Index i) {
  const PackRegion& g = r[region_of(r, n, i)];
  Index k = i - g.buffer_offset, off = g.tensor_offset;
  for (int d = g.box.ndim - 1; d >= 0; --d) {
    off += (k % g.box.shape[d]) * g.box.src_stride[d];
    k /= g.box.shape[d];
  }
  return off;
}

enum class PackOp { Pack, Unpack, UnpackAdd };

// buffer[0, total) <-> tensor regions. UnpackAdd adds into the tensor (dtype: f32/f64/i64
// by `add_type`, 0 = f32, 1 = f64, 2 = i64). Regions must be sorted by buffer_offset.
void region_pack_host(void* tensor, void* buffer, const std::vector<PackRegion>& regions,
                      Index total, std::size_t elem_size, PackOp op, int add_type);
void region_pack_cuda(void* tensor, void* buffer, const std::vector<PackRegion>& regions,
                      Index total, std::size_t elem_size, PackOp op, int add_type);

}  // namespace tessera::kernels
