#pragma once
// Upsample: sharded nearest or (bi/tri)linear upsampling by an integer factor per spatial
// dim of an (N, C, spatial...) ShardTensor (PyTorch semantics, align_corners either way). The
// output is split over the same process grid (balanced, or aligned with the input's
// cuts); each rank fills a halo
// sized to the input cells its output block reads (kernels::upsample_input_range), and
// the kernel evaluates the output block in global coordinates, so shard edges and the
// global edge (where linear clamps) are exact. Backward: the kernel's adjoint into a
// zeroed padded buffer, then the adjoint halo exchange.
#include "runtime/floor.hpp"
#include <memory>
#include <vector>

#include "decomp/window_halo.hpp"
#include "runtime/nn/layer.hpp"

namespace tessera {

struct UpsampleOptions {
  enum class Mode { Nearest, Linear } mode = Mode::Nearest;
  std::vector<Index> scale;  // one integer factor >= 1 per spatial dim (1 to 3)
  // Linear only (PyTorch's align_corners=True): the corner cells' centres of input and
  // output meet, src = dst (L - 1) / (L scale - 1); false: src = (dst + 0.5) / scale - 0.5.
  bool align_corners = false;
  // Output partition: balanced over the input's grid, or aligned (output block = scale
  // times the input block: nearest needs no halo, linear one cell per side).
  OutputSplit split = OutputSplit::Balanced;
};

class Upsample : public Layer {
 public:
  explicit Upsample(UpsampleOptions opts);
  ~Upsample() override;

  ShardSpec output_spec(const ShardSpec& in) const override;
  ShardTensor forward(const ShardTensor& x) override;
  ShardTensor backward(const ShardTensor& dy) override;
  // Ghost room (Layer::input_room): the plan's widths; the input gradient in its frame.
  HaloWidths input_room(const Mesh& mesh, const ShardSpec& in) override;
  ShardTensor backward_in_room(const ShardTensor& dy) override { return backward_impl(dy, true); }
  std::string name() const override;
  bool keeps_input() const override { return false; }
  // One pass over x and y forward, two backward; the halo of the plan forward() makes.
  OpCost cost(const ShardSpec& in, const ShardSpec& out, DType dtype) const override;
  // The input cells each output block reads, per dim of an input spec.
  std::vector<HaloReach> reach(const ShardSpec& in) const;

  const UpsampleOptions& options() const { return opts_; }

 private:
  ShardTensor backward_impl(const ShardTensor& dy, bool keep_room);
  struct Saved;
  Saved& saved_for(const Mesh& mesh, const ShardSpec& in);  // the plan for inputs of `in`
  UpsampleOptions opts_;
  std::unique_ptr<Saved> saved_;
};

}  // namespace tessera
