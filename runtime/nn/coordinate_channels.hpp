#pragma once
// CoordinateChannels: appends one channel per spatial dim holding each cell's position on
// the global grid, i / (n - 1) in [0, 1] (numpy's linspace(0, 1, n), as the reference FNO
// feeds its lifting layer). Translation-equivariant layers (1x1 convs, spectral convs)
// learn boundary-dependent fields only through them; the same values come out on a finer
// grid, so a model keeps its meaning there. No communication; the gradient of the input is
// the output gradient's first C channels.
#include "runtime/floor.hpp"
#include "runtime/nn/layer.hpp"

namespace tessera {

class CoordinateChannels : public Layer {
 public:
  explicit CoordinateChannels(int nd) : nd_(nd) {}

  ShardSpec output_spec(const ShardSpec& in) const override;
  ShardTensor forward(const ShardTensor& x) override;
  ShardTensor backward(const ShardTensor& dy) override;
  std::string name() const override { return "CoordinateChannels"; }
  bool keeps_input() const override { return false; }

 private:
  int nd_;
  ShardSpec in_spec_;
};

}  // namespace tessera
