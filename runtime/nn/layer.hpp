#pragma once
// Layer: one sharded operation with an exact backward. forward() takes the input shard
// and saves what backward() needs; backward() takes the output gradient and returns the
// input gradient, *adding* parameter gradients into Parameter::grad (so a parameter
// used twice accumulates; callers zero them between steps).
//
// Parameters are replicated over the mesh (or sharded: see ParameterShard), and a layer's
// backward adds only this rank's contribution, on the device where the parameter lives, with no
// communication. The layer declares in Parameter::grad_axes the mesh axes over which those
// contributions are partial (the axes that shard its input); GradSync (runtime/comm/grad_sync.hpp)
// is the one place that sums them, in buckets, after or overlapped with backward.
#include "runtime/floor.hpp"
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "decomp/halo_geometry.hpp"
#include "runtime/nn/op_cost.hpp"
#include "runtime/tensor/shard_tensor.hpp"

namespace tessera {

struct ParameterShard;  // runtime/nn/parameter_shard.hpp
struct DeferredValue;   // runtime/nn/parameter_shard.hpp
class Graph;            // runtime/nn/graph.hpp

struct Parameter {
  std::string name;  // "weight", "bias", ...
  Tensor value;      // full (replicated) value on every rank, or this rank's block (shard)
  Tensor grad;       // same shape and dtype as value
  // Mesh axes over which grad holds this rank's share of a sum, ascending; set by the
  // layer when it accumulates (the same on every rank). Empty: grad is already whole.
  std::vector<int> grad_axes = {};
  // Sharded parameters (mode-sharded spectral weights): value and grad are this rank's
  // block of one global tensor. Null: replicated. A layer whose blocks depend on its input's
  // decomposition sets `awaits_layout` until Layer::bind gives them (GradSync, optimizers
  // and checkpoints refuse a parameter still waiting).
  std::shared_ptr<const ParameterShard> shard = nullptr;
  bool awaits_layout = false;
  // Set while the value is not allocated yet (a parameter awaiting its layout): its global
  // shape, type and initial values, so that bind allocates only this rank's block; value and
  // grad are undefined until then (global_shape(), parameter_dtype() answer meanwhile).
  std::shared_ptr<const DeferredValue> deferred = nullptr;
};

class Layer {
 public:
  virtual ~Layer() = default;
  // The output's spec for an input spec, computed per rank without communication.
  virtual ShardSpec output_spec(const ShardSpec& in) const = 0;
  virtual ShardTensor forward(const ShardTensor& x) = 0;
  virtual ShardTensor backward(const ShardTensor& dy) = 0;
  virtual std::vector<Parameter*> parameters() { return {}; }
  virtual std::string name() const = 0;
  // Drops what forward saved for backward (a forward without gradients: evaluation,
  // inference); backward then refuses, as before any forward. Layers that save nothing
  // need not override it.
  virtual void release_saved() {}
  // One step's cost (runtime/nn/op_cost.hpp) for an input spec and the output spec it
  // gives, in `dtype`. The default is a local element-wise op (a few flops and four passes
  // per element: x, y; dy, dx); layers that communicate or compute more say so.
  virtual OpCost cost(const ShardSpec& in, const ShardSpec& out, DType dtype) const {
    (void)in;
    return elementwise_cost(out, size_of(dtype), 2, 4);
  }
  // Whether forward keeps its input until backward (what a step's memory holds).
  virtual bool keeps_input() const { return true; }
  // While on, forward is a replay (Graph::recompute): the same input again, to rebuild what
  // backward needs; a layer whose forward changes state beyond that (BatchNorm's running
  // statistics) leaves it unchanged, so a step with recompute equals one without.
  virtual void set_replay(bool on) { (void)on; }
  // Lays out what depends on the input's decomposition (sharded parameters' blocks) for
  // inputs of spec `in` on `mesh`. Collective over the mesh; Graph::bind calls it before a
  // trainer registers the parameters. Default: nothing depends on it.
  virtual void bind(const Mesh& mesh, const ShardSpec& in) {
    (void)mesh;
    (void)in;
  }

  // Ghost room (ShardTensor::has_room): the graph lets a producer write its output into the
  // interior of a padded buffer when every consumer's halo exchange wants that room, so the
  // exchange fills ghosts in place instead of copying the shard into a padded buffer.
  // The room this layer's exchange fills around an input of spec `in` (empty: none; only
  // such layers are handed inputs with room). Collective: may build the layer's halo plan.
  virtual HaloWidths input_room(const Mesh& mesh, const ShardSpec& in) {
    (void)mesh;
    (void)in;
    return {};
  }
  // forward writing the output into a buffer with `room` around it. Default: forward.
  virtual ShardTensor forward_into_room(const ShardTensor& x, const HaloWidths& room) {
    (void)room;
    return forward(x);
  }
  // backward leaving the input gradient in the ghost frame it was computed in (its
  // interior, a strided view: no copy). Default: backward.
  virtual ShardTensor backward_in_room(const ShardTensor& dy) { return backward(dy); }
  // Whether backward takes an output gradient with room (a strided local()).
  virtual bool takes_grad_in_room() const { return false; }

 private:
  friend class Graph;
  // The Graph forward whose state this layer holds (a layer shared by two graphs, a train and
  // an eval graph, must not give one graph's backward the other's saved input).
  std::uint64_t forward_ticket_ = 0;
};

}  // namespace tessera
