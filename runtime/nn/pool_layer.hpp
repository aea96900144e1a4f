#pragma once
// Pool: sharded max or average pooling over the 1-3 spatial dims of an (N, C, spatial...)
// ShardTensor. Any kernel, stride and padding (left and right may differ), overlapping
// windows included, floor or ceil mode (PyTorch's ceil_mode), dilated max pooling. The output is
// split over the same process grid (balanced, or aligned with the input's cuts); each rank fills a
// halo sized to the input range its outputs read (widths differ per rank) and pools a window of the
// padded buffer, applying the domain padding itself (max pooling treats it as -inf), so the result
// equals single-device pooling. Backward: local pooling adjoint into a zeroed padded buffer, then
// the adjoint halo exchange adds ghost gradients into their owners.
#include "runtime/floor.hpp"
#include <memory>
#include <vector>

#include "decomp/conv_window.hpp"
#include "decomp/window_halo.hpp"
#include "runtime/nn/layer.hpp"

namespace tessera {

struct PoolOptions {
  enum class Kind { Max, Avg } kind = Kind::Max;
  std::vector<Index> kernel;      // one per spatial dim (1 to 3)
  std::vector<Index> stride;      // empty: the kernel (non-overlapping windows)
  std::vector<Index> dilation;    // empty: 1; max pooling only (as PyTorch)
  std::vector<Index> pad_lo;      // empty: zero
  std::vector<Index> pad_hi;      // empty: pad_lo
  bool count_include_pad = true;  // average pooling: divide by the kernel volume
  // PyTorch's ceil_mode: one more window where a partial one would still start inside the
  // input or the left padding. It overhangs the right padding; max pooling ignores the
  // overhang, average pooling divides by the window's part inside the (counted) padding.
  bool ceil_mode = false;
  // Output partition: balanced over the input's grid, or aligned with the input's cuts
  // (the block owning a window's centre computes it), as the conv layers offer.
  OutputSplit split = OutputSplit::Balanced;
};

class Pool : public Layer {
 public:
  explicit Pool(PoolOptions opts);
  ~Pool() override;

  ShardSpec output_spec(const ShardSpec& in) const override;
  ShardTensor forward(const ShardTensor& x) override;
  ShardTensor backward(const ShardTensor& dy) override;
  // Ghost room (Layer::input_room): the plan's widths; the input gradient in its frame.
  HaloWidths input_room(const Mesh& mesh, const ShardSpec& in) override;
  ShardTensor backward_in_room(const ShardTensor& dy) override { return backward_impl(dy, true); }
  std::string name() const override;
  void release_saved() override;
  // One pass over x and y forward, two backward; the halo of the plan forward() makes.
  OpCost cost(const ShardSpec& in, const ShardSpec& out, DType dtype) const override;

  const PoolOptions& options() const { return opts_; }
  // The window along spatial dim k (0-based among the spatial dims), as given.
  WindowDim window(int k) const;
  // ... for an input of global extent L along it: in ceil mode its right padding includes
  // the overhang of the last window.
  WindowDim window(int k, Index L) const;
  // The input cells each output block's windows read, per dim of an input spec.
  std::vector<HaloReach> reach(const ShardSpec& in) const;

 private:
  ShardTensor backward_impl(const ShardTensor& dy, bool keep_room);
  struct Saved;
  Saved& saved_for(const Mesh& mesh, const ShardSpec& in);  // the plan for inputs of `in`
  PoolOptions opts_;
  std::unique_ptr<Saved> saved_;
};

}  // namespace tessera
