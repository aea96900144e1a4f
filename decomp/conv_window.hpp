#pragma once
// Sliding-window arithmetic along one dim (conv, pooling, transposed conv), in global
// indices: which input cells the windows of an output range read. Sharded layers size
// their per-rank halos from it (as DistDL does: left and right may differ, and differ
// from rank to rank), so any kernel, stride, dilation and padding is exact.
#include <sstream>
#include <utility>

#include "decomp/box.hpp"
#include "decomp/error.hpp"

namespace tessera {

struct WindowDim {
  Index kernel = 1, stride = 1, dilation = 1;
  Index pad_lo = 0, pad_hi = 0;  // cells before index 0 and after the last input cell

  Index span() const { return dilation * (kernel - 1) + 1; }  // cells one window covers
  // Output extent for an input extent (0 when no window fits).
  Index out_extent(Index in) const {
    const Index room = in + pad_lo + pad_hi - span();
    return room < 0 ? 0 : room / stride + 1;
  }
  // Input cells [first, last) read by the windows of outputs [o_lo, o_hi); in the padded
  // frame they may reach below 0 or past the input (padding). Empty outputs read nothing.
  std::pair<Index, Index> input_range(Index o_lo, Index o_hi) const {
    if (o_hi <= o_lo) return {0, 0};
    return {o_lo * stride - pad_lo, (o_hi - 1) * stride - pad_lo + span()};
  }
  void validate(const char* where) const {
    if (kernel >= 1 && stride >= 1 && dilation >= 1 && pad_lo >= 0 && pad_hi >= 0) return;
    std::ostringstream os;
    os << where
       << ": a window needs kernel, stride, dilation >= 1 and padding >= 0 (got k=" << kernel
       << " s=" << stride << " d=" << dilation << " pad=" << pad_lo << "," << pad_hi << ")";
    throw Error(os.str());
  }
};

}  // namespace tessera
