#pragma once
// Realignment of a grid's block split, as a pair of layers: AlignToGranule gives the sharded
// spatial dims blocks whose edges lie on multiples of a granule (as balanced as whole granules
// allow), RestoreSplit gives a later value the split the first one met. A ViT embeds patches
// with a strided conv and returns to the grid with its transpose: a patch must not straddle
// two ranks, so where the grid's split cuts patches (16 patches over 3 ranks) the pair moves
// the few boundary cells there and back, instead of refusing the rank count. Both are the
// redistribute engine forward and backward (its adjoint: the move back), and identities where
// the split is already aligned.
#include "runtime/floor.hpp"
#include <memory>

#include "runtime/nn/layer.hpp"

namespace tessera {

// What both layers share: a move of the same values to the split output_spec gives (the
// redistribute engine; its adjoint, the move back), identities where the split is unchanged.
class Resplit : public Layer {
 public:
  ShardTensor forward(const ShardTensor& x) override;
  ShardTensor backward(const ShardTensor& dy) override;
  OpCost cost(const ShardSpec& in, const ShardSpec& out, DType dtype) const override;
  bool keeps_input() const override { return false; }

 private:
  ShardSpec in_spec_, out_spec_;
};

class AlignToGranule : public Resplit {
 public:
  // granule: cells per unit along each spatial dim (dims 2.. of (N, C, spatial...)).
  explicit AlignToGranule(Index granule);
  ShardSpec output_spec(const ShardSpec& in) const override;
  std::string name() const override;
  // The split the last output_spec met (RestoreSplit's target).
  std::shared_ptr<const ShardSpec> met() const { return met_; }

 private:
  Index granule_;
  std::shared_ptr<ShardSpec> met_;
};

class RestoreSplit : public Resplit {
 public:
  explicit RestoreSplit(std::shared_ptr<const AlignToGranule> partner);
  ShardSpec output_spec(const ShardSpec& in) const override;
  std::string name() const override { return "RestoreSplit"; }

 private:
  std::shared_ptr<const AlignToGranule> partner_;
};

}  // namespace tessera
