#pragma once
// Sharded normalization layers on (N, C, spatial...) ShardTensors, any layout without
// Partial axes, on 1-D and 2-D (any) meshes. Statistics are reduced over the mesh axes
// that shard the dims each statistic spans, so the sharded result equals the single-device
// one, forward and backward:
//   GroupNorm         per (sample, group) over the group's channels and all space;
//   BatchNorm         per channel over N and all space (training: batch statistics, and
//                     running mean / unbiased variance updated with momentum; eval: the
//                     running statistics);
//   ChannelLayerNorm  per (sample, position) over the channels (a reduction only when C is
//                     sharded).
// Mean and variance take two passes (the mean first, then the sum of squared deviations
// about it), each one local pass in double plus one all-reduce: a one-pass E[x^2] - mean^2
// loses about log10(mean^2 / var) digits, which fields with a large offset (temperatures
// in kelvin) cannot afford in float64. The backward uses the globally reduced sums
// S1 = sum(dy*gamma) and S2 = sum(dy*gamma*xhat). gamma ("weight", ones) and beta ("bias",
// zeros) are replicated Parameters of C entries; their gradients are this rank's
// contribution, partial over the mesh axes that shard the input (GradSync sums them).
#include "runtime/floor.hpp"
#include <memory>
#include <vector>

#include "runtime/nn/layer.hpp"

namespace tessera {

struct NormOptions {
  double eps = 1e-5;
  bool affine = true;        // learnable gamma and beta
  double momentum = 0.1;     // BatchNorm running statistics
  DType dtype = DType::f32;  // of the parameters (and the inputs they accept)
  MemSpace space = MemSpace::Host;
};

class NormLayer : public Layer {
 public:
  enum class Kind { Group, Batch, ChannelLayer };
  ~NormLayer() override;

  ShardSpec output_spec(const ShardSpec& in) const override;
  ShardTensor forward(const ShardTensor& x) override;
  ShardTensor backward(const ShardTensor& dy) override;
  std::vector<Parameter*> parameters() override;
  std::string name() const override;
  void release_saved() override;
  // A replayed forward (Graph::recompute) leaves BatchNorm's running statistics as they are.
  void set_replay(bool on) override { replay_ = on; }
  // Two passes forward and two backward; three all-reduces of float64 statistics along each
  // axis that shards the statistics' reach (sums; deviations and squares; the backward sums).
  OpCost cost(const ShardSpec& in, const ShardSpec& out, DType dtype) const override;

  Index channels() const { return channels_; }
  const NormOptions& options() const { return opts_; }
  Parameter& weight() { return gamma_; }
  Parameter& bias() { return beta_; }

 protected:
  NormLayer(Kind kind, Index channels, Index groups, const NormOptions& opts);
  // Batch statistics (true) or the running ones (BatchNorm in eval mode).
  bool use_batch_stats_ = true;
  bool replay_ = false;
  // BatchNorm: per channel, float64, on every rank.
  std::vector<double> running_mean_, running_var_;

 private:
  struct Saved;
  // The dims each statistic spans (its all-reduce runs over the axes sharding them).
  std::vector<int> stat_dims(int ndim) const;
  Kind kind_;
  Index channels_, groups_;
  NormOptions opts_;
  Parameter gamma_, beta_;
  std::unique_ptr<Saved> saved_;
};

class GroupNorm : public NormLayer {
 public:
  // `groups` must divide `channels`; where C is sharded, shards must hold whole groups.
  GroupNorm(Index groups, Index channels, const NormOptions& opts = {})
      : NormLayer(Kind::Group, channels, groups, opts) {}
};

class BatchNorm : public NormLayer {
 public:
  explicit BatchNorm(Index channels, const NormOptions& opts = {});
  void train(bool on) { use_batch_stats_ = on; }
  bool training() const { return use_batch_stats_; }
  const std::vector<double>& running_mean() const { return running_mean_; }
  const std::vector<double>& running_var() const { return running_var_; }
  // Sets both running statistics (C entries each; variances >= 0), as a checkpoint holds them.
  void set_running_stats(std::vector<double> mean, std::vector<double> var);
};

class ChannelLayerNorm : public NormLayer {
 public:
  explicit ChannelLayerNorm(Index channels, const NormOptions& opts = {})
      : NormLayer(Kind::ChannelLayer, channels, 1, opts) {}
};

}  // namespace tessera
