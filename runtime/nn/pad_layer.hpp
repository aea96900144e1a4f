#pragma once
// Pad: sharded padding of the 1-3 spatial dims of an (N, C, spatial...) ShardTensor, as
// PyTorch's F.pad: a constant, reflect (narrower than the extent), replicate or circular (the
// other end's cells, through a periodic halo), left and right widths per dim. The padded output is
// split over the same process grid (balanced, or aligned: each block keeps its input cells, the end
// blocks take the padding); each rank fills a halo sized to the input cells its output block reads
// (kernels::pad_input_range: a block at the domain's edge reads the cells the padding mirrors or
// repeats, from other ranks where its own shard is thinner), so the result equals single-device
// padding. Backward: the kernel's adjoint (each input cell sums the gradients of the cells that
// copy it) into a zeroed padded buffer, then the adjoint halo exchange. ConvNd's reflect and
// replicate padding modes run one first.
#include "runtime/floor.hpp"
#include <memory>
#include <vector>

#include "decomp/window_halo.hpp"
#include "kernels/pad.hpp"
#include "runtime/nn/window_copy_layer.hpp"

namespace tessera {

struct PadOptions {
  enum class Mode { Constant, Reflect, Replicate, Circular } mode = Mode::Constant;
  // One per spatial dim (1 to 3). Negative widths crop, as in F.pad (output o copies the
  // source of o - pad_lo, so reflect and replicate mirror about the uncropped edge, as
  // PyTorch does); circular takes widths >= 0, of any size (PyTorch: at most the extent).
  std::vector<Index> pad_lo;
  std::vector<Index> pad_hi;  // empty: pad_lo
  double value = 0.0;         // constant mode
  OutputSplit split = OutputSplit::Balanced;
};

class Pad : public WindowCopyLayer {
 public:
  explicit Pad(PadOptions opts);
  ~Pad() override;

  ShardSpec output_spec(const ShardSpec& in) const override;
  std::string name() const override;
  std::vector<HaloReach> reach(const ShardSpec& in) const override;

  const PadOptions& options() const { return opts_; }

 private:
  void forward_window(const Window& w, const Tensor& xw, const Tensor& y) override;
  void backward_window(const Tensor& dy, const Tensor& dxw) override;
  PadOptions opts_;
  kernels::PadDesc desc_;  // the last forward's window
};

}  // namespace tessera
