#pragma once
// Graph: a DAG of sharded layers and structural ops (channel concatenation, addition),
// the shape of a UNet with skip connections. Nodes are added in an order where every
// input already exists, so the insertion order is a topological order and cycles
// cannot be built.
//
// forward() runs the nodes in that order; each layer saves what its backward needs and
// the graph frees an intermediate value as soon as its last consumer has run.
// backward() runs the nodes in reverse and accumulates the gradient of a value that
// fans out (a skip connection) over all its consumers; parameter gradients are ADDED
// into Parameter::grad (zero_grad() between steps), each rank's local contribution: a
// GradSync sums them (on_grads_ready starts its buckets while backward runs).
//
// Recompute (activation checkpointing): nodes added between begin_segment() and
// end_segment() form a segment. With recompute(true), a forward with gradients keeps a
// segment's inputs (the values its nodes take from outside it) and, once the segment has run,
// drops what its ops saved for backward (Op::release_saved) and the values it used alone;
// backward, on reaching the segment, runs its forward again from the kept inputs (a replay:
// Op::set_replay, so BatchNorm's running statistics move once; none where no gradient
// reaches the segment) and then its backward. The
// numbers are those without recompute; a step holds one segment's saved state at a time
// instead of all of them, for one more forward of the segments.
//
// Parameter registry: every parameter has a stable name "<node>.<parameter>" (e.g.
// "enc1.conv.weight"), in node order; checkpoints are keyed by these names.
#include "runtime/floor.hpp"
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/nn/layer.hpp"
#include "runtime/nn/op.hpp"

namespace tessera {

// A tensor produced in the graph: the id of the node that produces it.
struct Value {
  int id = -1;
  bool valid() const { return id >= 0; }
};

// One node's share of a step's cost (runtime/nn/op_cost.hpp), for the busiest rank.
struct NodeCost {
  std::string name, op;          // node name and the op's name
  std::vector<Index> out_shape;  // global
  double out_bytes = 0;          // the busiest rank's output block
  bool kept = false;             // held until backward (a consumer keeps it, or an output)
  // With recompute: the node's segment (-1: none), whose saved state (cost.saved_bytes) and
  // values held by its own ops (kept_in_segment) live only while the segment runs.
  int segment = -1;
  bool kept_in_segment = false;
  // The segments this value enters where an op keeping its input takes it: while such a
  // segment runs the value is held twice (kept for the replay, and the op's copy of it, a
  // conv's padded frame).
  std::vector<int> copied_in;
  OpCost cost;
};

struct NamedParameter {
  std::string name;  // "<node>.<parameter name>"
  Parameter* param;
};

class Graph {
 public:
  enum class Kind { Input, Layer, Concat, Add, Op };

  // Graph inputs, in the order forward() takes them.
  Value input(const std::string& name);
  // A layer node. A layer object may appear in one node only (it keeps the state of
  // one forward for its backward), whether added here or as a LayerOp. Two graphs may share
  // one (a train and an eval graph of one encoder), but a graph's backward refuses when
  // the other graph ran a forward through it after this graph's forward: the layer holds
  // that forward's state now.
  Value layer(const std::string& name, std::shared_ptr<Layer> layer, Value x);
  // Channel concatenation of (N, C, ...) tensors: [a, b] along dim 1. Both must have
  // the same global shape, placements and shard sizes in every other dim, dim 1
  // unsharded, the same dtype and memory space. The local shards are concatenated
  // with no communication; backward splits the gradient.
  Value concat(const std::string& name, Value a, Value b);
  // Element-wise a + b (residual). b is redistributed to a's spec if they differ.
  Value add(const std::string& name, Value a, Value b);
  // Any op over any number of values (runtime/nn/op.hpp): the families beyond the conv
  // layers (attention over several inputs, point ops) enter the graph here.
  Value op(const std::string& name, std::shared_ptr<Op> op, const std::vector<Value>& inputs);
  // Marks graph outputs, in the order forward() returns them.
  void output(Value v);
  // Recompute segments (above): the nodes added in between (not inputs) form one; segments
  // do not nest. Returns the segment's number.
  int begin_segment();
  void end_segment();
  int num_segments() const { return segments_; }
  // Off by default; takes effect at the next forward. The same on every rank (a rank that
  // replays makes collectives the others do not): set it before bind(), which compares it.
  void recompute(bool on) { recompute_ = on; }
  bool recompute() const { return recompute_; }

  // Collective over the inputs' mesh. Returns the outputs.
  std::vector<ShardTensor> forward(const std::vector<ShardTensor>& inputs);
  ShardTensor forward(const ShardTensor& x);  // one input, one output
  // Gradients of the outputs (undefined: no gradient from that output) in, gradients
  // of the inputs out (zeros where none reached an input). Needs a preceding forward. A
  // second backward of one forward adds the gradients again where every layer kept its
  // state; those that free it in their backward (the convolutions) refuse, and so the graph.
  std::vector<ShardTensor> backward(const std::vector<ShardTensor>& output_grads);
  ShardTensor backward(const ShardTensor& dy);

  // Output specs for input specs, per rank without communication (layers'
  // output_spec and the structural ops' rules). Throws where an op cannot take a spec.
  std::vector<ShardSpec> output_specs(const std::vector<ShardSpec>& input_specs) const;

  // Lays out what depends on the inputs' decomposition (Layer::bind: sharded parameters'
  // blocks) for inputs of these specs on `mesh`. Collective over the mesh; call it before
  // parameters are registered with GradSync or an optimizer. A layer that needs it and was not
  // bound binds itself at its first forward.
  void bind(const Mesh& mesh, const std::vector<ShardSpec>& input_specs);

  // Every op node's cost of one training step for these input specs, in node order, from the
  // specs alone (no data, no communication); see costs_complete().
  std::vector<NodeCost> costs(const std::vector<ShardSpec>& input_specs, DType dtype) const;
  // Whether every op's cost is complete (Op::cost_complete).
  bool costs_complete() const;

  std::vector<NamedParameter> parameters() const;
  Parameter& parameter(const std::string& name) const;  // throws naming unknown names
  void zero_grad() const;
  // Called during backward with each layer's parameters once its backward has run
  // (their gradients are final for this step): the hook that starts bucketed
  // all-reduces while the rest of backward runs.
  void on_grads_ready(std::function<void(const std::vector<Parameter*>&)> hook) {
    grads_ready_ = std::move(hook);
  }

  // Ghost room (on by default): a value whose consumers all exchange halos with the same
  // widths is written by its producer into a buffer with that room, and their exchanges
  // fill it in place (no copy of the shard into a padded buffer); input gradients stay in
  // their ghost frames where the producer's backward reads them in place (no clone). Off:
  // every value and gradient is a plain contiguous shard (the same numbers).
  void ghost_room(bool on) { ghost_room_ = on; }
  // Values given room by the last forward (tests and benchmarks).
  int values_in_room() const { return values_in_room_; }
  // The ghost room input k's consumers want for inputs of these specs on `mesh`: their
  // common widths, empty when they disagree, one wants none, or ghost room is off. A caller
  // that writes input k into a buffer with this room (ShardTensor::with_room) has it used in
  // place: no copy of the shard into a padded buffer. Collective over the mesh on a change.
  HaloWidths input_room(int k, const Mesh& mesh, const std::vector<ShardSpec>& in_specs);

  // Keep every intermediate value after forward (for inspection); off by default.
  void keep_values(bool on) { keep_values_ = on; }
  // Off: forward is for its output only (evaluation, inference): each op drops what it saved
  // for backward as soon as it has run (Op::release_saved), so a forward holds the live values
  // alone, and backward refuses. On by default.
  void set_grad_enabled(bool on) { grad_enabled_ = on; }
  bool grad_enabled() const { return grad_enabled_; }
  // A value of the last forward: outputs and inputs always, others with keep_values.
  const ShardTensor& value(Value v) const;

  int num_nodes() const { return static_cast<int>(nodes_.size()); }
  const std::string& node_name(Value v) const;
  Kind node_kind(Value v) const;

 private:
  // The graph schedules and frees; the op computes (runtime/nn/op.hpp).
  struct Node {
    Kind kind;
    std::string name;
    std::shared_ptr<Op> op;        // null for inputs
    std::shared_ptr<Layer> layer;  // layer nodes: the layer, so one is not used twice
    std::vector<int> inputs;
    std::vector<ShardSpec> input_specs;  // of the last forward
    int segment = -1;                    // recompute segment, -1: none
  };

  int add_node(Node n);
  // The forward ticket of the object that holds a node's saved state (its layer, or its op;
  // not for inputs).
  static std::uint64_t& ticket_of(const Node& n);
  // Walks the nodes in order from the inputs' specs, each node's output spec from its
  // inputs' (errors name the node), calling visit(node id, input specs, output spec) for
  // every op node. Returns the outputs' specs. `what` names the caller in errors.
  std::vector<ShardSpec> walk_specs(
      const char* what, const std::vector<ShardSpec>& input_specs,
      const std::function<void(std::size_t, const std::vector<ShardSpec>&, const ShardSpec&)>&
          visit) const;
  const Node& node(Value v, const char* what) const;
  void accumulate(int value, ShardTensor g);
  struct Rooms;
  // Node id's op run on its input values (the ghost room `rooms` gives).
  ShardTensor run_op(std::size_t id, const std::vector<const ShardTensor*>& in, const Rooms& rooms);
  // Whether node id is the last of its segment (false outside segments).
  bool ends_segment(std::size_t id) const;
  // Per segment, the values its nodes take from outside it.
  std::vector<std::vector<int>> segment_inputs() const;
  // Backward reaching segment node `last`: runs the segment's forward again where a gradient
  // reaches it (run_replay: nodes first..last), and lets go of its kept inputs.
  void replay_segment(std::size_t last);
  void run_replay(std::size_t first, std::size_t last);

  std::vector<Node> nodes_;
  std::vector<int> inputs_, outputs_;
  std::vector<ShardTensor> values_, grads_;
  std::vector<bool> grad_owned_;  // grads_[i] is a buffer the graph allocated
  std::vector<ShardSpec> value_specs_;
  Mesh mesh_;
  bool forwarded_ = false, keep_values_ = false, ghost_room_ = true;
  bool grad_enabled_ = true, forwarded_with_grad_ = false;
  int values_in_room_ = 0;
  std::uint64_t ticket_ = 0;  // this graph's last forward, stamped on its layers and ops
  int backwards_ = 0;         // backward passes since that forward
  int segments_ = 0, open_segment_ = -1;
  bool recompute_ = false, replaying_forward_ = false;  // the last forward released segments
  std::vector<int> replays_left_;  // per value: segments still to replay that take it
  std::vector<std::vector<int>> segment_inputs_;  // the last forward's, with recompute
  // The ghost room of every op input and value for one layout of the graph's inputs, kept
  // until the inputs' specs, the mesh, the graph or its flags change (a training loop
  // forwards the same layout every step).
  struct Rooms {
    std::vector<ShardSpec> in_specs;
    MPI_Comm comm = MPI_COMM_NULL;
    std::size_t nodes = 0;
    std::vector<int> outputs;
    bool on = false, keep = false;
    std::vector<std::vector<HaloWidths>> wants;  // per op input (Op::input_room)
    std::vector<HaloWidths> of_value;            // what each value's producer writes
  };
  Rooms rooms_, replay_rooms_;  // the cache; the last forward's, for replays
  const Rooms& rooms_for(const std::vector<ShardSpec>& in_specs);  // collective on a change
  // The room each op input wants (Op::input_room) for the inputs' specs; collective.
  std::vector<std::vector<HaloWidths>> wanted_rooms(const std::vector<ShardSpec>& in_specs);
  // The room each value's producer writes: what all its consumers want, when they agree (for
  // a graph input, the room its caller may write it in: input_room).
  std::vector<HaloWidths> value_rooms(const std::vector<std::vector<HaloWidths>>& wants) const;
  std::function<void(const std::vector<Parameter*>&)> grads_ready_;
};

}  // namespace tessera
