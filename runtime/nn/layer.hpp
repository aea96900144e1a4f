#pragma once
// Layer: one sharded operation with an exact backward. forward() takes the input shard
// and saves what backward() needs; backward() takes the output gradient and returns the
// input gradient, *adding* parameter gradients into Parameter::grad (so a parameter
// used twice accumulates; callers zero them between steps). Parameters are replicated
// over the mesh; their gradients are summed over the mesh axes that shard the input
// (every rank ends with the full gradient) unless reduce_grads is off, which leaves
// the local contribution for a caller that buckets the all-reduce itself.
#include "runtime/floor.hpp"
#include <string>
#include <vector>

#include "runtime/tensor/shard_tensor.hpp"

namespace tessera {

struct Parameter {
  std::string name;  // "weight", "bias", ...
  Tensor value;      // full (replicated) value on every rank
  Tensor grad;       // same shape and dtype as value
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

  bool reduce_grads = true;
};

}  // namespace tessera
