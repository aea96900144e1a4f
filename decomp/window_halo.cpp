#include "decomp/window_halo.hpp"

#include <algorithm>
#include <sstream>

#include "decomp/error.hpp"

namespace tessera {

Index conv_first_output_at(const WindowDim& w, Index c) {
  // Output o's window centre is o*stride - pad_lo + dilation*((kernel-1)/2).
  return ceil_div(c + w.pad_lo - w.dilation * ((w.kernel - 1) / 2), w.stride);
}

Index transposed_first_output_at(const WindowDim& w, Index c) {
  // Input i's window (the output cells it writes) is centred on i*stride - pad_lo + dilation*h.
  return c * w.stride - w.pad_lo + w.dilation * ((w.kernel - 1) / 2);
}

std::vector<Index> split_output(const BlockPartition& in, int d, Index out_extent,
                                OutputSplit split,
                                const std::function<Index(Index)>& first_output_at) {
  const int parts = in.grid().at(static_cast<std::size_t>(d));
  if (split == OutputSplit::Balanced || parts == 1) return balanced_sizes(out_extent, parts);
  const auto& off = in.offsets(d);
  const Index lo = in.domain().lo[d], hi = in.domain().hi[d];
  std::vector<Index> cut(parts + 1);
  cut[0] = 0;
  cut[parts] = out_extent;
  for (int i = 1; i < parts; ++i) {
    // Outputs anchored in the padding go to the block owning the first or last input cell,
    // so leading and trailing empty input blocks get no outputs.
    const Index c = off[i] - lo;
    const Index at = off[i] <= lo ? 0 : off[i] >= hi ? out_extent : first_output_at(c);
    cut[i] = std::clamp(at, cut[i - 1], out_extent);
  }
  std::vector<Index> sizes(parts);
  for (int i = 0; i < parts; ++i) sizes[i] = cut[i + 1] - cut[i];
  return sizes;
}

HaloReach window_reach(const WindowDim& w, bool periodic) {
  HaloReach r;
  r.range = [w](Index lo, Index hi) { return w.input_range(lo, hi); };
  r.periodic = periodic;
  return r;
}

WindowHalo::WindowHalo(const BlockPartition& haloed, const BlockPartition& driver,
                       const std::vector<HaloReach>& reach)
    : haloed_(haloed), driver_(driver) {
  const int nd = haloed.ndim();
  if (driver.ndim() != nd || haloed.grid() != driver.grid() ||
      static_cast<int>(reach.size()) != nd) {
    std::ostringstream os;
    os << "WindowHalo: the haloed partition (" << nd << " dims) and the driving partition ("
       << driver.ndim() << " dims) need the same grid and one reach per dim (got " << reach.size()
       << ")";
    throw Error(os.str());
  }
  for (int d = 0; d < nd; ++d) periodic_.push_back(reach[d].periodic);
  std::vector<std::vector<Index>> left, right;
  for (int b = 0; b < haloed.num_blocks(); ++b) {
    BlockWindow w;
    w.owned = haloed.block(b);
    const Box drv = driver.block(b);
    w.idle = drv.empty();
    w.touched = w.window = w.owned;
    w.clip_lo.assign(nd, 0);
    w.clip_hi.assign(nd, 0);
    w.left.assign(nd, 0);
    w.right.assign(nd, 0);
    if (w.idle) {  // nothing to do: an empty window at the block's corner
      for (int d = 0; d < nd; ++d) w.touched.hi[d] = w.window.hi[d] = w.owned.lo[d];
    } else {
      for (int d = 0; d < nd; ++d) {
        if (!reach[d].range) continue;
        const auto [first, last] = reach[d].range(drv.lo[d], drv.hi[d]);
        w.touched.lo[d] = first;
        w.touched.hi[d] = last;
        Index wlo = first, whi = last;
        if (!reach[d].periodic) {
          wlo = std::max(first, haloed.domain().lo[d]);
          whi = std::min(last, haloed.domain().hi[d]);
        }
        if (whi <= wlo) {
          std::ostringstream os;
          os << "WindowHalo: block " << b << " works on cells [" << first << "," << last
             << ") of dim " << d << ", all outside the domain [" << haloed.domain().lo[d] << ","
             << haloed.domain().hi[d] << "): padding as wide as the window is not supported";
          throw Error(os.str());
        }
        w.window.lo[d] = wlo;
        w.window.hi[d] = whi;
        w.clip_lo[d] = wlo - first;
        w.clip_hi[d] = last - whi;
        w.left[d] = std::max<Index>(0, w.owned.lo[d] - wlo);
        w.right[d] = std::max<Index>(0, whi - w.owned.hi[d]);
        any_ghosts_ = any_ghosts_ || w.left[d] > 0 || w.right[d] > 0;
      }
    }
    left.push_back(w.left);
    right.push_back(w.right);
    blocks_.push_back(std::move(w));
  }
  widths_ = HaloWidths::per_block(std::move(left), std::move(right));
}

}  // namespace tessera
