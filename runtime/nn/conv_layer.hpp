#pragma once
// Sharded N-d convolution (Conv1d/2d/3d) on tensors (N, C, spatial...) whose spatial (and
// batch) dims may be sharded over any mesh axes, evenly or not. Any kernel (odd or even),
// stride, dilation, groups, zero, circular, reflect or replicate padding (PyTorch's
// padding_mode), left and right padding may differ.
//
// Each rank computes its block of the output, whose partition is derived from the input's
// on every rank (OutputSplit). The input cells those outputs read come from a halo exchange
// with per-block widths (DistDL-style global index arithmetic, decomp/window_halo.hpp);
// zero padding is the local kernel's own (clipped per rank), circular padding is a
// periodic halo; reflect and replicate padding, and zero padding as wide as the window span
// (windows wholly in padding), run a sharded Pad first (as PyTorch pads before its
// convolution), whose output the convolution reads without padding. Backward: the local
// backward-data writes into a zeroed halo'd buffer whose ghosts are added into their owners
// (adjoint exchange); weight and bias gradients are this rank's contribution, partial over the mesh
// axes that shard the input (GradSync sums them).
#include "runtime/floor.hpp"
#include <memory>
#include <string>
#include <vector>

#include "decomp/window_halo.hpp"
#include "runtime/nn/layer.hpp"
#include "runtime/nn/window_layout.hpp"

namespace tessera {

enum class PaddingMode { Zeros, Circular, Reflect, Replicate };
// "zeros", "circular", "reflect", "replicate" (PyTorch's padding_mode names).
std::string name_of(PaddingMode m);

struct ConvOptions {
  int nd = 2;  // spatial dims, 1..3
  Index in_channels = 1, out_channels = 1;
  // Per spatial dim, or one value for all of them.
  std::vector<Index> kernel = {3};
  std::vector<Index> stride = {1};
  std::vector<Index> dilation = {1};
  std::vector<Index> padding = {0};    // both sides (the low side when padding_hi is given)
  std::vector<Index> padding_hi = {};  // the high side where it differs; empty: = padding
  PaddingMode padding_mode = PaddingMode::Zeros;
  Index groups = 1;
  bool bias = true;
  DType dtype = DType::f32;
  MemSpace space = MemSpace::Host;
  OutputSplit split = OutputSplit::Balanced;
  // Overlap the halo exchange with compute: forward computes the outputs whose windows need
  // no ghost while the halo is in flight and the boundary slabs after it arrives; backward
  // computes the weight gradient while the ghost gradients travel.
  bool overlap = false;
  // PyTorch's default init, U(-1/sqrt(fan_in), 1/sqrt(fan_in)), the same on every rank.
  unsigned seed = 0;
};

class ConvNd;
class Pad;
// A token-wise Linear cin -> cout on (N, C, nd dims...): a 1x1 convolution whose parameters
// are named "<prefix>.weight" and "<prefix>.bias" (for layers that hold several; an empty
// prefix keeps "weight" and "bias").
std::unique_ptr<ConvNd> token_linear(int nd, Index cin, Index cout, DType dtype, MemSpace space,
                                     unsigned seed, const std::string& prefix);

class ConvNd : public Layer {
 public:
  explicit ConvNd(const ConvOptions& opts);
  ~ConvNd() override;

  ShardSpec output_spec(const ShardSpec& in) const override;
  ShardTensor forward(const ShardTensor& x) override;
  ShardTensor backward(const ShardTensor& dy) override;
  // The halo plan's widths: a producer writing into that room saves the input's copy into a
  // padded buffer; backward_in_room returns the input gradient in its frame (no clone).
  HaloWidths input_room(const Mesh& mesh, const ShardSpec& in) override;
  ShardTensor backward_in_room(const ShardTensor& dy) override { return backward_impl(dy, true); }
  std::vector<Parameter*> parameters() override;
  std::string name() const override;
  void release_saved() override;
  // Direct convolution counted three times (forward, backward data, backward weights); the
  // halo of the plan forward() makes.
  OpCost cost(const ShardSpec& in, const ShardSpec& out, DType dtype) const override;

  Parameter& weight() { return weight_; }                      // (C_out, C_in / groups, kernel...)
  Parameter* bias() { return opts_.bias ? &bias_ : nullptr; }  // (C_out)
  const ConvOptions& options() const { return opts_; }
  // The window along spatial dim d (0-based), with the layer's padding (none where a Pad
  // layer pads first: reflect, replicate, zeros as wide as the span).
  const WindowDim& window(int d) const { return win_[static_cast<std::size_t>(d)]; }

 private:
  const WindowPlan& plan_for(const Mesh& mesh, const ShardSpec& in);
  void forward_overlapped(const WindowPlan& p, const ShardTensor& x, const Tensor& y);
  ShardTensor backward_impl(const ShardTensor& dy, bool keep_room);
  ShardTensor forward_conv(const ShardTensor& x);  // on the (padded) input
  ShardSpec conv_output_spec(const ShardSpec& padded) const;
  std::vector<WindowDim> given_windows() const;  // win_ with the Pad's widths (for names)
  ShardTensor backward_conv(const ShardTensor& dy, bool keep_room);
  // The outputs `piece` (global box, part of this rank's output block) into y.
  void forward_piece(const WindowPlan& p, const Box& piece, const Tensor& y);

  ConvOptions opts_;
  std::vector<WindowDim> win_;
  std::unique_ptr<Pad> pad_;  // reflect, replicate, wide zeros: applied before the window
  Parameter weight_, bias_;
  std::unique_ptr<WindowPlan> plan_;  // for the last input spec seen
  HaloFrame saved_x_;                 // forward's input with ghosts, for the weight gradient
  bool have_saved_ = false;
};

}  // namespace tessera
