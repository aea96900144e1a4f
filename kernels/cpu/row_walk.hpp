#pragma once
// Host loop over the rows of a strided N-d copy: every dim but the innermost, walked.
#include "kernels/floor.hpp"
#include "kernels/strided_index.hpp"

namespace tessera::kernels {

// Walks all but the innermost dim as an odometer (no division per row: short rows, like
// the 1-4 cell W-faces of a halo, are dominated by loop overhead); fn(src_off, dst_off)
// handles one innermost run.
template <class Fn>
void for_each_row(const StridedCopy& c, Fn&& fn) {
  const int outer = c.ndim - 1;
  Index rows = 1;
  for (int d = 0; d < outer; ++d) rows *= c.shape[d];
  Index k[kMaxDims] = {};
  Index so = 0, dof = 0;
  for (Index r = 0; r < rows; ++r) {
    fn(so, dof);
    for (int d = outer - 1; d >= 0; --d) {  // advance the odometer
      so += c.src_stride[d];
      dof += c.dst_stride[d];
      if (++k[d] < c.shape[d]) break;
      so -= c.shape[d] * c.src_stride[d];
      dof -= c.shape[d] * c.dst_stride[d];
      k[d] = 0;
    }
  }
}

}  // namespace tessera::kernels
