#pragma once
// Named tensors: the currency of checkpoints. A graph's parameters by registry name
// ("enc1.conv.weight") and an optimizer's state ("enc1.conv.weight.exp_avg", "step")
// leave and enter the runtime as lists of host tensors, independent of the rank count
// (parameters and optimizer state are replicated, so any mesh can load them).
#include "runtime/floor.hpp"
#include <string>
#include <vector>

#include "runtime/tensor/named_tensor.hpp"
#include "runtime/tensor/tensor.hpp"

namespace tessera {

class Graph;

// Host copies of every parameter value, in registry order.
std::vector<NamedTensor> parameter_state(const Graph& g);
// Copies values into the graph's parameters (into their memory space, float32 <->
// float64 converted). Every parameter must be present with its shape; with `strict`,
// names the graph does not have are errors too. Errors name the entry.
void load_parameter_state(const Graph& g, const std::vector<NamedTensor>& state,
                          bool strict = true);

// A host copy of `src` in dtype `dt` (float32 <-> float64; other pairs must match).
Tensor host_converted(const Tensor& src, DType dt);

}  // namespace tessera
