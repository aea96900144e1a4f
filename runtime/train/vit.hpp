#pragma once
// ViT for grid-to-grid regression (a vision transformer on the patches of a sharded grid):
//
//   embed:    patches of patch^nd cells -> dim channels (a strided conv, kernel = stride =
//             patch), plus fixed sinusoidal positions of the patches (SinusoidalPositions)
//             or learned ones (LearnedPositions, interpolated on another grid)
//   block{l}: x + Attention(LayerNorm(x)), then x + MLP(LayerNorm(x)); the attention is
//             global (MultiHeadAttention) or, with a window, NeighborhoodAttention
//             (token-wise MLP dim -> mlp_ratio dim -> dim, GELU)
//   head:     LayerNorm, un-patchify (a transposed conv, kernel = stride = patch) -> out
//
// The patches stay where their cells are: a rank's tokens are the patches of its block, and
// the global attention runs over all ranks that share a sample (runtime/attention/
// multi_head_attention.hpp). Positions are normalized to the grid, so the same parameters
// run on a larger grid with more patches.
#include "runtime/floor.hpp"
#include <string>
#include <vector>

#include "runtime/attention/sequence_attention.hpp"
#include "runtime/train/model.hpp"

namespace tessera {

struct VitOptions {
  int nd = 2;
  Index in_channels = 1, out_channels = 1;
  Index patch = 4;
  Index dim = 32;
  int depth = 2;
  Index heads = 4;
  Index mlp_ratio = 2;
  SequenceAlgorithm attention = SequenceAlgorithm::Auto;  // global attention's algorithm
  Index window = 0;  // > 0: neighbourhood attention over window x ... tokens instead
  // Learned position embeddings (LearnedPositions: a table per token of `position_grid`,
  // the token grid trained on, sharded with the tokens) instead of the sinusoidal ones.
  bool learned_positions = false;
  std::vector<Index> position_grid;
  DType dtype = DType::f32;
  MemSpace space = MemSpace::Host;
  unsigned seed = 0;
};

// Why a grid of `shape` (N, C, spatial...) cannot be cut into patches of edge `patch` with
// at least `window` patches per dim (0: global attention), else "". Before the model is
// built too, so a patch past the grid is said as such, not as the size of its weights.
std::string vit_grid_problem(const std::vector<Index>& shape, Index patch, Index window);

class Vit : public Model {
 public:
  explicit Vit(const VitOptions& opts);

  Graph& graph() override { return graph_; }
  const VitOptions& options() const { return opts_; }
  std::string input_problem(const std::vector<Index>& shape) const override;
  std::string signature() const override;

 private:
  VitOptions opts_;
  Graph graph_;
};

}  // namespace tessera
