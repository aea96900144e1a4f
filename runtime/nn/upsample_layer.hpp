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
#include "kernels/upsample.hpp"
#include "runtime/nn/window_copy_layer.hpp"

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

class Upsample : public WindowCopyLayer {
 public:
  explicit Upsample(UpsampleOptions opts);
  ~Upsample() override;

  ShardSpec output_spec(const ShardSpec& in) const override;
  std::string name() const override;
  std::vector<HaloReach> reach(const ShardSpec& in) const override;

  const UpsampleOptions& options() const { return opts_; }

 private:
  void forward_window(const Window& w, const Tensor& xw, const Tensor& y) override;
  void backward_window(const Tensor& dy, const Tensor& dxw) override;
  double flops_per_output() const override { return 1.0; }
  UpsampleOptions opts_;
  kernels::UpsampleDesc desc_;  // the last forward's window
};

}  // namespace tessera
