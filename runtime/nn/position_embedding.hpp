#pragma once
// SinusoidalPositions: adds to every token of (N, C, spatial...) a fixed embedding of its
// position on the global grid, sharded with the tokens (each rank computes its own block's
// from the global coordinates; no communication, no parameters). The channels are split
// into one group per spatial dim; in the group of dim d, channel pair k holds
// sin(pi 2^k u) and cos(pi 2^k u) with u = i / (n - 1) in [0, 1] the normalized position
// along d (channels left over get nothing). Normalized positions make the embedding the same
// function of space on a finer grid, so a model trained on one grid runs on another. The
// gradient of the input is the output gradient.
#include "runtime/floor.hpp"
#include "runtime/nn/layer.hpp"

namespace tessera {

class SinusoidalPositions : public Layer {
 public:
  SinusoidalPositions(int nd, Index channels);

  ShardSpec output_spec(const ShardSpec& in) const override;
  ShardTensor forward(const ShardTensor& x) override;
  ShardTensor backward(const ShardTensor& dy) override;
  std::string name() const override { return "SinusoidalPositions"; }
  bool keeps_input() const override { return false; }

 private:
  int nd_;
  Index channels_;
  ShardSpec spec_;
};

}  // namespace tessera
