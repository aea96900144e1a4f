#pragma once
// Index arithmetic of a strided N-d copy, shared by the host loop and the CUDA kernel:
// element i (row-major over `shape`) lives at src offset sum(idx*src_stride) and
// dst offset sum(idx*dst_stride). Strides are in elements.
#include "kernels/floor.hpp"
#include "decomp/box.hpp"
#include "decomp/host_device.hpp"

namespace tessera::kernels {

struct StridedCopy {
  int ndim = 0;
  Index shape[kMaxDims] = {};
  Index src_stride[kMaxDims] = {};
  Index dst_stride[kMaxDims] = {};

  TESSERA_HD Index count() const {
    Index n = 1;
    for (int d = 0; d < ndim; ++d) n *= shape[d];
    return n;
  }
  TESSERA_HD void offsets(Index i, Index& src, Index& dst) const {
    src = 0;
    dst = 0;
    for (int d = ndim - 1; d >= 0; --d) {
      const Index k = i % shape[d];
      i /= shape[d];
      src += k * src_stride[d];
      dst += k * dst_stride[d];
    }
  }
};

// Merges dims that are contiguous in both src and dst and drops extent-1 dims, so
// loops run over the fewest, longest runs. Returns an equivalent descriptor.
StridedCopy simplify(const StridedCopy& c);

}  // namespace tessera::kernels
