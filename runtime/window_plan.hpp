#pragma once
// WindowPlan: what one rank of a windowed layer (pooling, upsampling) reads. The output
// is split over the same process grid as the input; each output block's cells read a
// global input range per dim (a window rule, e.g. WindowDim::input_range), which may
// reach past the domain. The plan gives every block's halo widths (so the owned box
// grown by them covers the range it reads, clipped to the domain) and this rank's
// clipped input box plus how far the unclipped range hangs over each domain edge: the
// padding the local kernel applies itself.
#include <functional>
#include <utility>
#include <vector>

#include "decomp/halo_geometry.hpp"
#include "runtime/shard_spec.hpp"

namespace tessera {

class Mesh;

// Global input range [first, last) read by outputs [o_lo, o_hi) along tensor dim d.
using InputRangeFn = std::function<std::pair<Index, Index>(int d, Index o_lo, Index o_hi)>;

// The output spec of a layer mapping `in` to `out_shape`: dims whose extent changes are
// split in balanced parts over their mesh axis; the others keep in's sizes.
ShardSpec balanced_output_spec(const ShardSpec& in, const std::vector<Index>& out_shape);

struct WindowPlan {
  HaloWidths widths;          // per block of in's partition
  Box window;                 // this rank's input cells read, global, clipped to the domain
  std::vector<Index> pad_lo;  // per dim: cells the read range hangs below 0
  std::vector<Index> pad_hi;  // per dim: cells it hangs past the domain's end
  bool active = false;        // this rank has output cells
};

// Computed per rank without communication (every rank derives every block's widths).
WindowPlan make_window_plan(const Mesh& mesh, const ShardSpec& in, const ShardSpec& out,
                            const InputRangeFn& reads);

}  // namespace tessera
