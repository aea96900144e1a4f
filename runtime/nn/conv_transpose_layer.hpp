#pragma once
// Sharded transposed convolution (ConvTranspose1d/2d/3d), the adjoint of ConvNd's
// operator plus a bias: any kernel, stride (kernel != stride included), dilation, groups,
// padding (cropping; left and right may differ) and output_padding, PyTorch's semantics.
//
// Forward: each rank scatters its input block into a zeroed halo'd output buffer covering
// every output cell its inputs touch (the local backward-data kernel), then the adjoint halo
// exchange adds the overlapping ghost cells into their owners. Backward: a forward halo
// exchange of dy, then the local conv forward (dx) and weight gradient read the same
// window. The output partition is derived from the input's (OutputSplit). Cropping as wide
// as the window span (padding >= span) is partly a cropping Pad's, after the scatter.
#include "runtime/floor.hpp"
#include <memory>
#include <string>
#include <vector>

#include "decomp/window_halo.hpp"
#include "runtime/nn/layer.hpp"
#include "runtime/nn/window_layout.hpp"

namespace tessera {

class Pad;

struct ConvTransposeOptions {
  int nd = 2;  // spatial dims, 1..3
  Index in_channels = 1, out_channels = 1;
  // Per spatial dim, or one value for all of them.
  std::vector<Index> kernel = {2};
  std::vector<Index> stride = {1};
  std::vector<Index> dilation = {1};
  std::vector<Index> padding = {0};         // cropped from both sides (the low side when
  std::vector<Index> padding_hi = {};       //   padding_hi is given; empty: = padding)
  std::vector<Index> output_padding = {0};  // extra cells on the high side
  Index groups = 1;
  bool bias = true;
  DType dtype = DType::f32;
  MemSpace space = MemSpace::Host;
  OutputSplit split = OutputSplit::Balanced;
  unsigned seed = 0;
};

class ConvTransposeNd : public Layer {
 public:
  explicit ConvTransposeNd(const ConvTransposeOptions& opts);
  ~ConvTransposeNd() override;

  ShardSpec output_spec(const ShardSpec& in) const override;
  ShardTensor forward(const ShardTensor& x) override;
  ShardTensor backward(const ShardTensor& dy) override;
  std::vector<Parameter*> parameters() override;
  std::string name() const override;
  void release_saved() override;
  // The conv it transposes counted three times; the halo (on the output) of forward's plan.
  OpCost cost(const ShardSpec& in, const ShardSpec& out, DType dtype) const override;

  Parameter& weight() { return weight_; }  // (C_in, C_out / groups, kernel...), as PyTorch
  Parameter* bias() { return opts_.bias ? &bias_ : nullptr; }  // (C_out)
  const ConvTransposeOptions& options() const { return opts_; }

 private:
  const WindowPlan& plan_for(const Mesh& mesh, const ShardSpec& in);
  ShardSpec scatter_output_spec(const ShardSpec& in) const;  // before the crop
  ShardTensor forward_scatter(const ShardTensor& x);
  ShardTensor backward_scatter(const ShardTensor& dy);

  ConvTransposeOptions opts_;
  std::vector<WindowDim> win_;        // of the conv this layer transposes (the scatter's crop)
  std::vector<WindowDim> given_win_;  // with the padding as given (for names)
  std::unique_ptr<Pad> crop_;         // cropping the scatter leaves (padding >= span), or null
  std::vector<Index> out_pad_;
  Parameter weight_, bias_;
  std::unique_ptr<WindowPlan> plan_;  // haloed: the output; driver: the input
  ShardTensor saved_x_;
  bool have_saved_ = false;
};

}  // namespace tessera
