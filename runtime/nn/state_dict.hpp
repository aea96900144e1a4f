#pragma once
// Named tensors: the currency of checkpoints. A graph's parameters by registry name
// ("enc1.conv.weight") and an optimizer's state ("enc1.conv.weight.exp_avg", "step")
// leave and enter the runtime as lists of host tensors, independent of the rank count
// (replicated parameters as they are, sharded ones gathered to their global tensor and
// sliced to each rank's block on loading, so any mesh can load them).
#include "runtime/floor.hpp"
#include <string>
#include <vector>

#include "runtime/tensor/named_tensor.hpp"
#include "runtime/tensor/tensor.hpp"

namespace tessera {

class Graph;

// Host copies of every parameter's global value, in registry order. Collective over the
// mesh where a parameter is sharded.
std::vector<NamedTensor> parameter_state(const Graph& g);
// The same as entries made when used (NamedTensor::make): a checkpoint writer gathers one at
// a time. Valid while the graph's parameters are unchanged.
std::vector<NamedTensor> parameter_entries(const Graph& g);
// Every entry's tensor made (the entries' values at this moment).
std::vector<NamedTensor> made(const std::vector<NamedTensor>& entries);
// Copies values into the graph's parameters (into their memory space, float32 <->
// float64 converted; a sharded parameter takes its block). Every parameter must be present
// with its global shape; with `strict`,
// names the graph does not have are errors too. Errors name the entry.
void load_parameter_state(const Graph& g, const std::vector<NamedTensor>& state,
                          bool strict = true);

// A host copy of `src` in dtype `dt` (float32 <-> float64; other pairs must match).
Tensor host_converted(const Tensor& src, DType dt);

}  // namespace tessera
