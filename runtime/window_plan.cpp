#include "runtime/window_plan.hpp"

#include <algorithm>

#include "runtime/error.hpp"
#include "runtime/halo_tensor.hpp"
#include "runtime/mesh.hpp"

namespace tessera {

ShardSpec balanced_output_spec(const ShardSpec& in, const std::vector<Index>& out_shape) {
  TESSERA_CHECK(
      static_cast<int>(out_shape.size()) == in.ndim(),
      "balanced_output_spec: output rank " << out_shape.size() << " != input rank " << in.ndim());
  std::vector<std::vector<Index>> sizes(in.ndim());
  for (int d = 0; d < in.ndim(); ++d) {
    const Placement p = in.placement(d);
    if (!p.sharded()) continue;
    if (out_shape[d] == in.global_shape()[d])
      sizes[d] = in.sizes(d);
    else
      sizes[d] = balanced_sizes(out_shape[d], in.mesh_dims()[p.axis]);
  }
  return ShardSpec(out_shape, in.placements(), in.mesh_dims(), {}, sizes);
}

namespace {
// Input cells block `in_box` must see so that output block `out_box` can be computed:
// per dim the read range clipped to the domain (empty box when nothing is computed).
bool read_box(const ShardSpec& in, const Box& out_box, const InputRangeFn& reads, Box& clipped,
              std::vector<Index>& over_lo, std::vector<Index>& over_hi) {
  const int nd = in.ndim();
  clipped = Box(std::vector<Index>(nd, 0), std::vector<Index>(nd, 0));
  over_lo.assign(nd, 0);
  over_hi.assign(nd, 0);
  if (out_box.empty()) return false;
  for (int d = 0; d < nd; ++d) {
    const Index L = in.global_shape()[d];
    const auto [lo, hi] = reads(d, out_box.lo[d], out_box.hi[d]);
    TESSERA_CHECK(lo < hi && lo < L && hi > 0,
                  "window plan: outputs [" << out_box.lo[d] << ", " << out_box.hi[d] << ") of dim "
                                           << d << " read no input cell (range [" << lo << ", "
                                           << hi << ") of " << L << ")");
    clipped.lo[d] = std::max<Index>(lo, 0);
    clipped.hi[d] = std::min(hi, L);
    over_lo[d] = std::max<Index>(0, -lo);
    over_hi[d] = std::max<Index>(0, hi - L);
  }
  return true;
}
}  // namespace

WindowPlan make_window_plan(const Mesh& mesh, const ShardSpec& in, const ShardSpec& out,
                            const InputRangeFn& reads) {
  TESSERA_CHECK(in.placements() == out.placements() && in.mesh_dims() == out.mesh_dims(),
                "window plan: input " << in.str() << " and output " << out.str()
                                      << " are not split over the same process grid");
  const int nd = in.ndim();
  const int blocks = in.partition().num_blocks();
  std::vector<std::vector<Index>> left(blocks, std::vector<Index>(nd, 0));
  std::vector<std::vector<Index>> right = left;
  Box clipped;
  std::vector<Index> olo, ohi;
  for (int b = 0; b < blocks; ++b) {
    const Box ib = in.partition().block(b);
    if (!read_box(in, out.partition().block(b), reads, clipped, olo, ohi)) continue;
    for (int d = 0; d < nd; ++d) {
      left[b][d] = std::max<Index>(0, ib.lo[d] - clipped.lo[d]);
      right[b][d] = std::max<Index>(0, clipped.hi[d] - ib.hi[d]);
    }
  }
  WindowPlan p;
  p.widths = HaloWidths::per_block(left, right);
  const int me = block_of(mesh, in);
  p.active = read_box(in, out.partition().block(me), reads, p.window, p.pad_lo, p.pad_hi);
  return p;
}

}  // namespace tessera
