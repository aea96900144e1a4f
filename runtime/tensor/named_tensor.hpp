#pragma once
// A tensor with a registry name: the currency of checkpoints ("enc1.conv.weight",
// "enc1.conv.weight.exp_avg", "step"). Host tensors, independent of the rank count.
#include "runtime/floor.hpp"
#include <string>

#include "runtime/tensor/tensor.hpp"

namespace tessera {

struct NamedTensor {
  std::string name;
  Tensor tensor;
};

}  // namespace tessera
