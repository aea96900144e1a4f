#pragma once
// Per-block halos of sliding-window layers (conv, transposed conv, pooling, upsampling).
//
// A layer's work on one block reads (conv) or writes (transposed conv) a range of cells of
// a "haloed" tensor - the conv's input, the transposed conv's output - that may reach past
// the block's own cells. From each block's range this computes, without communication:
// the window the local kernel works on (the range clipped to the domain along open dims;
// the clipped amounts are the kernel's own zero padding or cropping, so ghost cells never
// need zeroing), and the left/right ghost widths of every block (HaloWidths::per_block),
// which may differ per side and per block. Along periodic dims nothing is clipped: the
// halo exchange wraps (circular padding), also onto the same block when the dim is not split.
//
// The output partition of such a layer is derived from the input's the same way on every
// rank: balanced over the same grid, or aligned with the input's cuts.
#include <functional>
#include <utility>
#include <vector>

#include "decomp/conv_window.hpp"
#include "decomp/halo_geometry.hpp"
#include "decomp/partition.hpp"

namespace tessera {

// floor(a / b) and ceil(a / b) for b > 0 and any sign of a.
inline Index floor_div(Index a, Index b) {
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}
inline Index ceil_div(Index a, Index b) {
  return -floor_div(-a, b);
}

// How a layer's output extent is split over the blocks along a dim.
enum class OutputSplit {
  Balanced,  // balanced_sizes over the same grid: layers chained through a UNet's down and up
             // paths come back to the same partition
  Aligned,   // follows the input's cuts: output cell o goes to the block owning its window's
             // centre, so uneven inputs keep small halos (and kernel == stride needs none)
};

// The first output cell whose window centre is input cell >= c (monotone in c), for a conv
// (outputs read windows) and a transposed conv (inputs write windows).
Index conv_first_output_at(const WindowDim& w, Index c);
Index transposed_first_output_at(const WindowDim& w, Index c);

// The sizes of `out_extent` output cells over the grid of `in` along dim d.
std::vector<Index> split_output(const BlockPartition& in, int d, Index out_extent,
                                OutputSplit split,
                                const std::function<Index(Index)>& first_output_at);

// One dim of the haloed tensor: the cells [first, last) a block's work touches, from the
// block's range [lo, hi) in the driving partition (the conv's output, the transposed conv's
// input). An empty `range` means the block touches exactly its own cells (no halo: batch and
// channel dims).
struct HaloReach {
  std::function<std::pair<Index, Index>(Index lo, Index hi)> range;
  bool periodic = false;
};
// The input cells the windows of outputs [lo, hi) read. For a transposed conv described by the
// conv it transposes (its padding is w's), the output cells inputs [lo, hi) write.
HaloReach window_reach(const WindowDim& w, bool periodic);
inline HaloReach no_reach() {
  return {};
}

// Everything one block needs, in global coordinates of the haloed tensor.
struct BlockWindow {
  Box owned;    // the block
  Box touched;  // cells its work touches, unclipped (may lie outside the domain)
  Box window;   // touched clipped to the domain along open dims; inside owned grown by the widths
  std::vector<Index> clip_lo, clip_hi;  // touched minus window per side: kernel padding/cropping
  std::vector<Index> left, right;       // ghost widths
  bool idle = false;                    // the driving block is empty: no work, no window
};

class WindowHalo {
 public:
  WindowHalo() = default;
  // haloed and driver: partitions of the two tensors over the same grid; reach: per dim.
  WindowHalo(const BlockPartition& haloed, const BlockPartition& driver,
             const std::vector<HaloReach>& reach);

  const BlockPartition& haloed() const { return haloed_; }
  const BlockPartition& driver() const { return driver_; }
  const BlockWindow& block(int b) const { return blocks_.at(static_cast<std::size_t>(b)); }
  const HaloWidths& widths() const { return widths_; }
  const std::vector<bool>& periodic() const { return periodic_; }
  bool any_ghosts() const { return any_ghosts_; }  // false: no block needs a halo exchange

 private:
  BlockPartition haloed_, driver_;
  std::vector<BlockWindow> blocks_;
  HaloWidths widths_;
  std::vector<bool> periodic_;
  bool any_ghosts_ = false;
};

}  // namespace tessera
