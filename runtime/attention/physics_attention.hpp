#pragma once
// PhysicsAttention: Transolver's attention over a sharded set of tokens (points of a cloud,
// or the cells of a grid), on (N, C, tokens...) tensors whose token dims (and batch) may be
// sharded over any mesh axes, evenly or not. Each token is softly assigned to `slices`
// slices per head; the slice tokens are weighted means over ALL tokens - this rank's
// partial sums plus one all-reduce over the axes that shard the tokens - and attention runs
// among those few tokens (replicated, float64), whose results each token reads back with
// its own weights (kernels/physics_attention.hpp has the algebra).
//
// Forward: the in-projection (a token-wise Linear C -> 2 H D: the slice inputs and the
// values), slicing, one all-reduce of (A, Z), token attention, de-slicing, the
// out-projection (H D -> C). Backward: one all-reduce of the de-slice adjoint dO; the
// rest is local. So the sharded result equals one rank's, forward and backward, at any
// decomposition, for O(tokens) work and O(slices x dim) communication per head.
//
// Parameters: in.weight, in.bias, out.weight, out.bias (the two token-wise Linears, as
// 1x1 convolutions), slice.weight (M, D), slice.bias (M), temperature (H, init 0.5),
// q.weight, k.weight, v.weight (D, D, no bias; shared by the heads). Their gradients are
// partial over the axes that shard the input (q, k, v: only over those that shard the
// batch, since every rank sees all slice tokens of its samples); GradSync sums them.
#include "runtime/floor.hpp"
#include <memory>
#include <string>
#include <vector>

#include "runtime/nn/conv_layer.hpp"
#include "runtime/nn/layer.hpp"

namespace tessera {

struct PhysicsAttentionOptions {
  int nd = 1;          // token dims of the input (points: 1; a grid's cells: 2 or 3)
  Index channels = 0;  // C, in and out
  Index heads = 4;     // H
  Index head_dim = 8;  // D
  Index slices = 16;   // M
  double eps = 1e-5;   // slice tokens are sums / (weights + eps), as Transolver
  double temperature = 0.5;
  DType dtype = DType::f32;
  MemSpace space = MemSpace::Host;  // or Cuda (the token part runs on the host either way)
  unsigned seed = 0;                // the same on every rank
};

class PhysicsAttention : public Layer {
 public:
  explicit PhysicsAttention(const PhysicsAttentionOptions& opts);
  ~PhysicsAttention() override;

  ShardSpec output_spec(const ShardSpec& in) const override;
  ShardTensor forward(const ShardTensor& x) override;
  ShardTensor backward(const ShardTensor& dy) override;
  std::vector<Parameter*> parameters() override;
  std::string name() const override;
  void release_saved() override;
  // The two Linears, slicing and de-slicing (forward and backward), and the two all-reduces
  // of float64 slice sums per axis that shards the tokens (forward sums, backward d_o).
  OpCost cost(const ShardSpec& in, const ShardSpec& out, DType dtype) const override;
  const PhysicsAttentionOptions& options() const { return opts_; }

 private:
  struct Saved;
  PhysicsAttentionOptions opts_;
  std::unique_ptr<ConvNd> in_, out_;
  Parameter slice_w_, slice_b_, temperature_, wq_, wk_, wv_;
  std::unique_ptr<Saved> saved_;
};

}  // namespace tessera
