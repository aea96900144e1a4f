#pragma once
// A tensor with a registry name: the currency of checkpoints ("enc1.conv.weight",
// "enc1.conv.weight.exp_avg", "step"). Host tensors, independent of the rank count.
#include "runtime/floor.hpp"
#include <functional>
#include <string>
#include <vector>

#include "runtime/tensor/tensor.hpp"

namespace tessera {

struct NamedTensor {
  std::string name;
  Tensor tensor;
  // Instead of `tensor`: a tensor made when it is used (a sharded parameter's blocks
  // gathered, a host copy), of the given shape and type. A checkpoint being written so holds
  // one whole tensor at a time, not every parameter and optimizer state at once; making it
  // may be collective (every rank uses the entries in the same order).
  std::function<Tensor()> make = {};
  std::vector<Index> made_shape = {};
  DType made_dtype = DType::f32;

  bool defined() const { return tensor.defined() || static_cast<bool>(make); }
  Tensor value() const { return tensor.defined() || !make ? tensor : make(); }
  std::vector<Index> shape() const { return tensor.defined() ? tensor.shape() : made_shape; }
  DType dtype() const { return tensor.defined() ? tensor.dtype() : made_dtype; }
};

}  // namespace tessera
