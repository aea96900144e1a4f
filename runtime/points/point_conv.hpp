#pragma once
// PointConv: a point convolution over each point's neighbourhood (EdgeConv / PointNet++ set
// abstraction style), exact at every decomposition. An Op of two inputs on (N, C, P) point
// tensors split over the ranks of the mesh axis that shards P, in contiguous ranges of point
// index (the batch may be split over another axis):
//   features (N, C, P)   what is convolved (gets a gradient)
//   source   (N, Cs, P)  the points' coordinates x, y, z in channels [pos_offset, +3)
//                        (data: no gradient)
// For each point i, its neighbours j - the k nearest (ties by global index, i itself
// included) or, with a radius, at most k within it, nearest first - are found with the
// exact distributed query on a collective RCB layout of the sample's points; their features
// and coordinates come by global index (IndexGather, whose adjoint sums the gradients back).
// y_i = reduce_j act(W [f_j, x_j - x_i] + b), reduce = max or mean (kernels/edge_conv.hpp).
//
// Neighbourhoods depend on the coordinates only: layers of one model share a
// PointNeighbourhoods, which computes them once per batch (keyed by the coordinates' bytes).
#include "runtime/floor.hpp"
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/activation.hpp"
#include "runtime/nn/op.hpp"
#include "runtime/points/index_gather.hpp"

namespace tessera {

struct NeighbourhoodOptions {
  Index neighbours = 16;  // k (a cloud of fewer points gives each point all of them)
  double radius = 0;      // > 0: ball query (at most k within radius), else kNN
  // Where each rank's local search runs (the grid hash on the host or the CUDA device;
  // PointConv sets its own memory space). The answer is the same.
  MemSpace search = MemSpace::Host;
  bool operator==(const NeighbourhoodOptions& o) const {
    return neighbours == o.neighbours && radius == o.radius;
  }
};

// Per sample of a batch: each local point's neighbour indices and the gather plan.
struct SampleNeighbours {
  Tensor ids;  // (points, min(k, the cloud's points)) int64 global point indices, -1: none
  std::shared_ptr<IndexGather> gather;
};

class PointNeighbourhoods {
 public:
  // Collective over the mesh axis of `axis` (-1: P not sharded). pos: (N, Cs, P_local)
  // host source tensor; offsets: the global index ranges of P per coordinate of the axis.
  const std::vector<SampleNeighbours>& get(const Mesh& mesh, int axis,
                                           const std::vector<Index>& offsets, const Tensor& pos,
                                           int pos_offset, const NeighbourhoodOptions& o);

 private:
  std::uint64_t key_ = 0;
  bool have_ = false;
  NeighbourhoodOptions opts_;
  std::vector<SampleNeighbours> samples_;
};

struct PointConvOptions {
  Index in_channels = 1, out_channels = 1;
  NeighbourhoodOptions neighbourhood;
  bool mean = false;  // reduction over the neighbours: max (default) or mean
  kernels::Activation activation = kernels::Activation::GELU;
  int pos_offset = 0;  // channel of x in the source input
  DType dtype = DType::f32;
  // Where the parameters and the edge convolution live; on a device, the neighbourhoods, the
  // gathers and the edges' assembly still run on the host (copies both ways per sample).
  MemSpace space = MemSpace::Host;
  unsigned seed = 0;                                    // the same on every rank
  std::shared_ptr<PointNeighbourhoods> neighbourhoods;  // shared by a model's layers, or null
};

class PointConv : public Op {
 public:
  explicit PointConv(const PointConvOptions& opts);
  ~PointConv() override;

  ShardSpec output_spec(const std::vector<ShardSpec>& in) const override;
  ShardTensor forward(const std::vector<ShardTensor>& in) override;
  std::vector<ShardTensor> backward(const ShardTensor& dy) override;
  std::vector<Parameter*> parameters() override { return {&weight_, &bias_}; }
  std::string name() const override;
  void release_saved() override;
  // The edges' arithmetic and memory; not the gathers' communication, which depends on where
  // the neighbours are (the cost is incomplete: the dry run refuses the model).
  OpCost cost(const std::vector<ShardSpec>& in, const ShardSpec& out, DType dtype) const override;
  bool cost_complete() const override { return false; }

  Parameter& weight() { return weight_; }  // (C_out, C_in + 3)
  Parameter& bias() { return bias_; }      // (C_out)

 private:
  struct Saved;
  PointConvOptions opts_;
  Parameter weight_, bias_;
  std::unique_ptr<Saved> saved_;
};

}  // namespace tessera
