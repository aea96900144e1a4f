#pragma once
// SpectralConv: the Fourier layer of an FNO on (N, C, spatial...) tensors sharded over any
// spatial (and batch) dims: y = F^-1( W . F(x) ), F the real FFT over the spatial dims
// truncated to the retained modes (per dim, the lowest and highest `modes` frequencies of a
// complex dim and the lowest `modes` bins of the last, real dim: the reference FNO's weight
// corners), W a complex (C_in, C_out) matrix per retained mode.
//
// The FFT is distributed (DistFft): pruned before each transpose, the spectrum left in the
// transposed layout, where each rank mixes channels for its own modes and inverts. Backward
// runs the exact adjoints of both transforms. The weights are stored as real
// (C_in, C_out, kept..., 2) (real and imaginary parts, so optimizers, checkpoints and GradSync
// treat them as any real parameter), either
//   - replicated: each rank adds the gradient of its own modes into the full gradient,
//     partial over the mesh axes that shard the spectrum, which GradSync sums; or
//   - sharded by mode (dfno, `shard_weights`): each rank holds only the block of its modes
//     in the spectrum's layout (runtime/nn/parameter_shard.hpp), so the weight gradient is
//     reduced only over the axes that split the batch, and a step's weight memory and
//     all-reduce shrink with the spectrum's ranks. The block depends on the input's
//     decomposition: bind() (Graph::bind) lays it out; checkpoints hold the global tensor.
#include "runtime/floor.hpp"
#include <memory>
#include <string>
#include <vector>

#include "runtime/nn/layer.hpp"
#include "runtime/spectral/dist_fft.hpp"

namespace tessera {

struct SpectralConvOptions {
  int nd = 2;  // spatial dims, 1..3
  Index in_channels = 1, out_channels = 1;
  std::vector<Index> modes = {8};  // per spatial dim, or one value for all
  DType dtype = DType::f32;
  MemSpace space = MemSpace::Host;
  // The reference FNO's init: real and imaginary parts U(0, 1) / (C_in * C_out), the same
  // on every rank (each entry a function of the seed and its index).
  unsigned seed = 0;
  // By mode, along the spectrum's sharded dims (see above). The weights are then allocated
  // when laid out (bind or the first forward), each rank's block only: weight().value is
  // undefined before (global_shape(weight()) gives the shape; a loaded state allocates it).
  bool shard_weights = false;
};

class SpectralConv : public Layer {
 public:
  explicit SpectralConv(const SpectralConvOptions& opts);

  ShardSpec output_spec(const ShardSpec& in) const override;
  ShardTensor forward(const ShardTensor& x) override;
  ShardTensor backward(const ShardTensor& dy) override;
  std::vector<Parameter*> parameters() override { return {&weight_}; }
  std::string name() const override;
  void release_saved() override;
  // The four transforms of a step (F and F^-1 forward, their adjoints backward) stage by
  // stage as the plan runs them, their transposes' all-to-alls, and the per-mode mixing
  // (forward, weight and input gradients).
  OpCost cost(const ShardSpec& in, const ShardSpec& out, DType dtype) const override;
  bool keeps_input() const override { return false; }  // its spectrum instead
  // Plans the transforms for `in` and, with shard_weights, keeps this rank's block of the
  // weights. Collective. Binding again to a decomposition with other blocks is an error.
  void bind(const Mesh& mesh, const ShardSpec& in) override;

  Parameter& weight() { return weight_; }  // (C_in, C_out, kept..., 2)
  const SpectralConvOptions& options() const { return opts_; }
  // The plans of the last input (null before the first forward).
  const DistFft* input_fft() const { return fft_in_.get(); }

 private:
  bool plan_for(const Mesh& mesh, const ShardSpec& in);  // true if it (re)planned
  void bind_weights();
  // The transforms' options: the input's (no spectrum given), or the output's, whose
  // spectrum takes the input spectrum's layout.
  FftOptions fft_options(const ShardSpec* spectrum = nullptr) const;
  Box weight_block() const;     // this rank's modes as a box of the (global) weight tensor
  Tensor local_weight() const;  // this rank's modes, (C_in, C_out, local kept...) complex
  // Mesh axes sharding the spectrum's modes (the weight blocks differ over them) and its
  // batch (a weight gradient is partial over them).
  std::vector<int> mode_axes() const;
  std::vector<int> batch_axes() const;

  SpectralConvOptions opts_;
  std::vector<Index> modes_;  // per spatial dim
  Parameter weight_;
  ShardSpec in_spec_;
  Mesh mesh_;
  std::unique_ptr<DistFft> fft_in_, fft_out_;
  ShardTensor x_hat_;  // forward's input spectrum, for the weight gradient
};

}  // namespace tessera
