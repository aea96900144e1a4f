#pragma once
// Runs of parameters whose tensors lie back to back in one allocation, as GradSync's
// buckets lay them out: an element-wise pass (optimizer update, gradient norm, scaling)
// then covers a whole run in one call instead of one call per parameter.
#include "runtime/floor.hpp"
#include <cstddef>
#include <vector>

#include "runtime/nn/graph.hpp"

namespace tessera {

struct FlatRun {
  std::vector<std::size_t> params;  // indices into the list, in memory order
  Index numel = 0;
  DType dtype = DType::f32;
  MemSpace space = MemSpace::Host;
};

// Groups the parameters into maximal runs of one dtype and memory space whose gradients
// (and, with `values`, also their values) follow each other in the same storage. Runs come
// in the order of their first parameter in the list (the same on every rank with the same
// layout); a parameter stored on its own is a run of one.
std::vector<FlatRun> flat_runs(const std::vector<NamedParameter>& params, bool values);

}  // namespace tessera
