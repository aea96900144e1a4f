#pragma once
// MultiHeadAttention: global self-attention among the tokens of (N, C, tokens...) tensors -
// the patches of a ViT on a grid - whose token dims (and batch) may be sharded over any mesh
// axes, evenly or not. A token-wise Linear makes q, k, v (C -> 3 C, heads of D = C / heads
// channels); the ranks that share a sample's tokens (those differing only in the axes that
// shard the token dims: a 2-D mesh of patches is one ring of its ranks) run exact sequence
// attention over all of them (SequenceAttention: ring, all-to-all or all-gather); a
// token-wise Linear maps back (C -> C). Attention without a causal rule does not depend on
// the order of the keys, so each rank's tokens simply form its block of the sequence.
// Parameters: qkv.weight, qkv.bias, out.weight, out.bias (gradients partial over the axes
// that shard the input; GradSync sums them).
#include "runtime/floor.hpp"
#include <memory>
#include <string>
#include <vector>

#include "runtime/attention/sequence_attention.hpp"
#include "runtime/comm/axes_comm.hpp"
#include "runtime/nn/conv_layer.hpp"
#include "runtime/nn/layer.hpp"

namespace tessera {

struct MultiHeadAttentionOptions {
  int nd = 2;  // token dims of the input
  Index channels = 0;
  Index heads = 1;  // must divide channels
  SequenceAlgorithm algorithm = SequenceAlgorithm::Auto;
  DType dtype = DType::f32;
  MemSpace space = MemSpace::Host;
  unsigned seed = 0;
};

class MultiHeadAttention : public Layer {
 public:
  explicit MultiHeadAttention(const MultiHeadAttentionOptions& opts);
  ~MultiHeadAttention() override;

  ShardSpec output_spec(const ShardSpec& in) const override;
  ShardTensor forward(const ShardTensor& x) override;
  ShardTensor backward(const ShardTensor& dy) override;
  std::vector<Parameter*> parameters() override;
  std::string name() const override;
  void release_saved() override;
  // The two Linears, attention as FlashAttention-2 counts it (2 matrix products forward,
  // 5 backward) and the sequence algorithm's traffic, as forward would choose it.
  OpCost cost(const ShardSpec& in, const ShardSpec& out, DType dtype) const override;
  // The sequence algorithm the last forward ran, and on how many ranks.
  std::string describe() const;

 private:
  struct Ring;  // the token group's line mesh, for one input spec
  struct Saved;
  MultiHeadAttentionOptions opts_;
  std::unique_ptr<ConvNd> qkv_, out_;
  std::unique_ptr<Ring> ring_;
  std::unique_ptr<SequenceAttention> attn_;
  std::unique_ptr<Saved> saved_;
};

}  // namespace tessera
