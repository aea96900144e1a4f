#pragma once
// NeighborhoodAttention: each token of a grid (N, C, spatial...) attends to its
// neighbourhood as NATTEN defines it (kernels/neighborhood_attention.hpp: exactly `kernel`
// keys per dim, odd or even, with dilation, windows shifted inward at the border), on a grid
// sharded over any spatial axes, evenly or not. A token-wise Linear makes q, k, v; the keys
// and values a block's windows reach come by a halo exchange whose per-block widths follow
// from the global window arithmetic (as for convolutions, decomp/window_halo.hpp), so halos
// deeper than a thin shard reach past the next rank; backward adds the key and value
// gradients of ghosts into their owners (the adjoint exchange). The result equals one rank's
// at every decomposition. Parameters: qkv.weight, qkv.bias, out.weight, out.bias.
#include "runtime/floor.hpp"
#include <memory>
#include <string>
#include <vector>

#include "runtime/nn/conv_layer.hpp"
#include "runtime/nn/layer.hpp"
#include "runtime/nn/window_layout.hpp"

namespace tessera {

struct NeighborhoodAttentionOptions {
  int nd = 2;
  Index channels = 0;
  Index heads = 1;                    // must divide channels
  std::vector<Index> kernel = {7};    // keys per dim (one value for all dims, or nd)
  std::vector<Index> dilation = {1};  // per dim, or one
  DType dtype = DType::f32;
  MemSpace space = MemSpace::Host;  // or Cuda
  unsigned seed = 0;
};

class NeighborhoodAttention : public Layer {
 public:
  explicit NeighborhoodAttention(const NeighborhoodAttentionOptions& opts);
  ~NeighborhoodAttention() override;

  ShardSpec output_spec(const ShardSpec& in) const override;
  ShardTensor forward(const ShardTensor& x) override;
  ShardTensor backward(const ShardTensor& dy) override;
  std::vector<Parameter*> parameters() override;
  std::string name() const override;
  void release_saved() override;
  // The two Linears, k keys per query as attention counts them, and the key/value halo of
  // forward's plan (and its adjoint).
  OpCost cost(const ShardSpec& in, const ShardSpec& out, DType dtype) const override;

 private:
  struct Saved;
  NeighborhoodAttentionOptions opts_;
  std::vector<Index> kernel_, dilation_;
  std::vector<HaloReach> reach(const ShardSpec& in) const;  // keys each query block reads
  std::unique_ptr<ConvNd> qkv_, out_;
  std::unique_ptr<WindowPlan> plan_;
  std::unique_ptr<Saved> saved_;
};

}  // namespace tessera
