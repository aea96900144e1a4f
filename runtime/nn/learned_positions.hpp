#pragma once
// LearnedPositions: adds a learned embedding table to (N, C, spatial...) tokens, one
// C-vector per token of the grid the table was made for (ViT's learned position embedding),
// sharded with the tokens:
//   - on its own grid, each rank holds only the block of the table of its tokens (a
//     ParameterShard over the mesh axes that split the tokens), so the table's gradient is
//     reduced only over the axes that split the batch, and its memory shrinks with the ranks;
//   - on another grid (a model run on a larger grid than it trained on), the table is kept
//     whole on every rank and interpolated multilinearly at normalized positions (token i of
//     n sits at u = i / (n - 1), as SinusoidalPositions places it): each rank interpolates
//     the block of its tokens, and backward adds the transposed interpolation.
// The layout follows the first input (bind, or the first forward); the table's global value
// (checkpoints) is the same either way. Init: normal(0, 0.02), entry by entry a function of
// the seed and the entry's index, so the table is allocated only when laid out (each rank's
// block, or the whole) and holds no value before (table().value is undefined until bind, a
// forward, or a loaded state).
#include "runtime/floor.hpp"
#include <vector>

#include "runtime/nn/layer.hpp"

namespace tessera {

struct LearnedPositionsOptions {
  int nd = 2;
  Index channels = 1;
  std::vector<Index> grid;  // the table's token grid, one extent per spatial dim
  DType dtype = DType::f32;
  MemSpace space = MemSpace::Host;
  unsigned seed = 0;
};

class LearnedPositions : public Layer {
 public:
  explicit LearnedPositions(const LearnedPositionsOptions& opts);

  ShardSpec output_spec(const ShardSpec& in) const override;
  ShardTensor forward(const ShardTensor& x) override;
  ShardTensor backward(const ShardTensor& dy) override;
  std::vector<Parameter*> parameters() override { return {&table_}; }
  std::string name() const override;
  bool keeps_input() const override { return false; }
  // Element-wise; a table sharded with the tokens has no gradient to all-reduce unless the
  // batch is split too.
  OpCost cost(const ShardSpec& in, const ShardSpec& out, DType dtype) const override;
  // Shards the table with the tokens when `in` is on the table's grid (collective); on
  // another grid, keeps it whole. A table sharded for one decomposition refuses another.
  void bind(const Mesh& mesh, const ShardSpec& in) override;

  Parameter& table() { return table_; }  // (C, grid...)

 private:
  bool on_table_grid(const ShardSpec& in) const;
  // This rank's embedding for the tokens of `box` (an input box), (C, local...) float64 host.
  Tensor embedding(const Box& box, const std::vector<Index>& grid) const;
  // Adds the gradient g = sum over the batch of dy, (C, local...) float64 host, for `box`.
  void add_table_grad(const Tensor& g, const Box& box, const std::vector<Index>& grid);

  LearnedPositionsOptions opts_;
  Parameter table_;
  Mesh mesh_;
  ShardSpec spec_;  // of the last forward
  bool bound_ = false;
};

}  // namespace tessera
