#pragma once
// Pointwise layers on ShardTensors of any layout (no halo, no communication in forward or
// backward): Activation (ReLU, GELU, SiLU, tanh), and ChannelBias, which adds a bias per
// channel (dim 1 of (N, C, spatial...)) and sums its gradient over the mesh axes that
// shard the input.
#include "runtime/floor.hpp"
#include "kernels/activation.hpp"
#include "runtime/nn/layer.hpp"

namespace tessera {

using kernels::Activation;

class ActivationLayer : public Layer {
 public:
  explicit ActivationLayer(Activation kind) : kind_(kind) { kernels::check_activation(kind); }

  ShardSpec output_spec(const ShardSpec& in) const override;
  ShardTensor forward(const ShardTensor& x) override;
  ShardTensor backward(const ShardTensor& dy) override;
  // Writes f(x) straight into the interior of a buffer with ghost room; backward reads an
  // output gradient in room as it is (both strided, no copies).
  ShardTensor forward_into_room(const ShardTensor& x, const HaloWidths& room) override;
  bool takes_grad_in_room() const override { return true; }
  std::string name() const override;
  void release_saved() override;
  // GELU's erf and its derivative: ~30 flops per element; x, y; x, dy, dx.
  OpCost cost(const ShardSpec& in, const ShardSpec& out, DType dtype) const override {
    (void)in;
    return elementwise_cost(out, size_of(dtype), 30, 5);
  }
  Activation kind() const { return kind_; }

 private:
  Activation kind_;
  ShardTensor x_;  // saved input: every derivative here is a function of x
};

class ChannelBias : public Layer {
 public:
  // A zero bias of `channels` entries in dtype and memory space.
  ChannelBias(Index channels, DType dtype = DType::f32, MemSpace space = MemSpace::Host);

  ShardSpec output_spec(const ShardSpec& in) const override;
  ShardTensor forward(const ShardTensor& x) override;
  ShardTensor backward(const ShardTensor& dy) override;
  std::vector<Parameter*> parameters() override { return {&bias_}; }
  std::string name() const override { return "ChannelBias"; }
  Parameter& bias() { return bias_; }

 private:
  Parameter bias_;
  ShardSpec spec_;  // of the last forward's input
};

}  // namespace tessera
