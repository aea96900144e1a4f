#pragma once
// Transolver (Wu et al. 2024) on the layer graph, for point clouds and grids alike: every
// point or cell is a token of (N, C, tokens...), sharded over any token dims and the batch.
//
//   coords:   (grids only) the cell coordinates appended as channels (CoordinateChannels)
//   pre:      token-wise MLP in -> 2 width -> width (GELU)
//   block{l}: x + PhysicsAttention(LayerNorm(x)), then x + MLP(LayerNorm(x))
//             (MLP width -> mlp_ratio width -> width, GELU)
//   head:     LayerNorm, token-wise Linear width -> out
//
// Token-wise Linears are 1x1 convolutions, LayerNorm is over the channels of each token;
// the only communication is the physics attention's all-reduce of its slice sums and the
// gradient reduction, so a step costs O(tokens / ranks) work per rank.
#include "runtime/floor.hpp"
#include <string>
#include <vector>

#include "runtime/train/model.hpp"

namespace tessera {

struct TransolverOptions {
  int nd = 1;                // token dims: 1 for point clouds, 1..3 for grids
  bool coordinates = false;  // append grid coordinates as channels (grids)
  Index in_channels = 1, out_channels = 1;
  Index width = 64;  // channels of the blocks; heads x head_dim = width
  int layers = 4;
  Index heads = 4;
  Index slices = 32;
  Index mlp_ratio = 2;
  DType dtype = DType::f32;
  MemSpace space = MemSpace::Host;
  unsigned seed = 0;  // parameter init, the same on every rank
};

class Transolver : public Model {
 public:
  explicit Transolver(const TransolverOptions& opts);

  Graph& graph() override { return graph_; }
  const TransolverOptions& options() const { return opts_; }
  std::string input_problem(const std::vector<Index>& shape) const override;
  std::string signature() const override;

 private:
  TransolverOptions opts_;
  Graph graph_;
};

}  // namespace tessera
