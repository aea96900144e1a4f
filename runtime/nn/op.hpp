#pragma once
// Op: a graph node's computation with any number of inputs and one output. The graph only
// schedules ops and frees values; what an op does, checks and saves for its backward lives
// in the op. Layers (one input, parameters) become ops through LayerOp; the structural ops
// (concatenation, addition) and the families to come (attention over several inputs,
// point-cloud ops over coordinates and features) implement Op directly.
#include "runtime/floor.hpp"
#include <memory>
#include <string>
#include <vector>

#include "runtime/nn/layer.hpp"

namespace tessera {

class Op {
 public:
  virtual ~Op() = default;
  // The output's spec for the inputs' specs, per rank without communication; throws
  // saying why an input cannot be taken.
  virtual ShardSpec output_spec(const std::vector<ShardSpec>& in) const = 0;
  // Saves what backward needs.
  virtual ShardTensor forward(const std::vector<ShardTensor>& in) = 0;
  // One gradient per input (undefined: none), parameter gradients added locally.
  virtual std::vector<ShardTensor> backward(const ShardTensor& dy) = 0;
  virtual std::vector<Parameter*> parameters() { return {}; }
  virtual std::string name() const = 0;
  // One step's cost for the inputs' specs and the output spec (runtime/nn/op_cost.hpp);
  // by default a local element-wise op over the output.
  virtual OpCost cost(const std::vector<ShardSpec>& in, const ShardSpec& out, DType dtype) const {
    (void)in;
    return elementwise_cost(out, size_of(dtype), 2, 4);
  }
  // Drops what forward saved for backward (Layer::release_saved).
  virtual void release_saved() {}
  // False where cost() leaves out what depends on the data (a point convolution's gathers).
  virtual bool cost_complete() const { return true; }
  // Whether forward keeps its inputs until backward (what a step's memory holds).
  virtual bool keeps_inputs() const { return true; }
  // Replayed forward (Layer::set_replay).
  virtual void set_replay(bool on) { (void)on; }
  // Lays out what depends on the inputs' decomposition (Layer::bind). Collective.
  virtual void bind(const Mesh& mesh, const std::vector<ShardSpec>& in) {
    (void)mesh;
    (void)in;
  }
  // Ghost room, as Layer's (runtime/nn/layer.hpp), for input k.
  virtual HaloWidths input_room(const Mesh& mesh, const std::vector<ShardSpec>& in, int k) {
    (void)mesh;
    (void)in;
    (void)k;
    return {};
  }
  virtual ShardTensor forward_into_room(const std::vector<ShardTensor>& in,
                                        const HaloWidths& room) {
    (void)room;
    return forward(in);
  }
  virtual std::vector<ShardTensor> backward_in_room(const ShardTensor& dy) { return backward(dy); }
  virtual bool takes_grad_in_room() const { return false; }

 private:
  friend class Graph;
  std::uint64_t forward_ticket_ = 0;  // as Layer's: the Graph forward whose state it holds
};

// A one-input Layer as an Op.
class LayerOp : public Op {
 public:
  explicit LayerOp(std::shared_ptr<Layer> layer) : layer_(std::move(layer)) {}
  ShardSpec output_spec(const std::vector<ShardSpec>& in) const override {
    return layer_->output_spec(in.at(0));
  }
  ShardTensor forward(const std::vector<ShardTensor>& in) override {
    return layer_->forward(in.at(0));
  }
  std::vector<ShardTensor> backward(const ShardTensor& dy) override {
    return {layer_->backward(dy)};
  }
  std::vector<Parameter*> parameters() override { return layer_->parameters(); }
  std::string name() const override { return layer_->name(); }
  void release_saved() override { layer_->release_saved(); }
  OpCost cost(const std::vector<ShardSpec>& in, const ShardSpec& out, DType dtype) const override {
    return layer_->cost(in.at(0), out, dtype);
  }
  bool keeps_inputs() const override { return layer_->keeps_input(); }
  void set_replay(bool on) override { layer_->set_replay(on); }
  void bind(const Mesh& mesh, const std::vector<ShardSpec>& in) override {
    layer_->bind(mesh, in.at(0));
  }
  HaloWidths input_room(const Mesh& mesh, const std::vector<ShardSpec>& in, int k) override {
    return k == 0 ? layer_->input_room(mesh, in.at(0)) : HaloWidths();
  }
  ShardTensor forward_into_room(const std::vector<ShardTensor>& in,
                                const HaloWidths& room) override {
    return layer_->forward_into_room(in.at(0), room);
  }
  std::vector<ShardTensor> backward_in_room(const ShardTensor& dy) override {
    return {layer_->backward_in_room(dy)};
  }
  bool takes_grad_in_room() const override { return layer_->takes_grad_in_room(); }
  const std::shared_ptr<Layer>& layer() const { return layer_; }

 private:
  std::shared_ptr<Layer> layer_;
};

// Channel concatenation [a, b] along dim 1 of (N, C, ...) tensors: local, no communication;
// backward splits the gradient. `node` names the graph node in errors.
class ConcatOp : public Op {
 public:
  explicit ConcatOp(std::string node) : node_(std::move(node)) {}
  ShardSpec output_spec(const std::vector<ShardSpec>& in) const override;
  ShardTensor forward(const std::vector<ShardTensor>& in) override;
  std::vector<ShardTensor> backward(const ShardTensor& dy) override;
  std::string name() const override { return "concat"; }
  OpCost cost(const std::vector<ShardSpec>& in, const ShardSpec& out, DType dtype) const override;
  bool keeps_inputs() const override { return false; }

 private:
  std::string node_;
  std::vector<ShardSpec> in_specs_;  // saved by forward
  Index split_ = 0;                  // channels of the first input
};

// Element-wise a + b (residual); b is redistributed to a's spec where they differ.
class AddOp : public Op {
 public:
  explicit AddOp(std::string node) : node_(std::move(node)) {}
  ShardSpec output_spec(const std::vector<ShardSpec>& in) const override;
  ShardTensor forward(const std::vector<ShardTensor>& in) override;
  std::vector<ShardTensor> backward(const ShardTensor& dy) override { return {dy, dy}; }
  std::string name() const override { return "add"; }
  OpCost cost(const std::vector<ShardSpec>& in, const ShardSpec& out, DType dtype) const override;
  bool keeps_inputs() const override { return false; }

 private:
  std::string node_;
};

// The spec of concat(a, b) along dim 1; throws saying what differs.
ShardSpec concat_spec(const ShardSpec& a, const ShardSpec& b);

}  // namespace tessera
