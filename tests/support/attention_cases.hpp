#pragma once
// The attention layers the host and device tests share: neighbourhood attention cases
// (1-D odd and even kernels with dilation, 2-D mixed, 3-D; two heads) and the physics
// attention layer of the tests.
#include <vector>

#include "runtime/attention/neighborhood_attention.hpp"
#include "runtime/attention/physics_attention.hpp"

namespace tessera::test {

struct NeighborhoodCase {
  std::vector<Index> shape;
  std::vector<Index> kernel, dilation;
};

inline NeighborhoodAttentionOptions neighborhood_options(const NeighborhoodCase& c, DType dt,
                                                         MemSpace space = MemSpace::Host) {
  NeighborhoodAttentionOptions o;
  o.nd = static_cast<int>(c.shape.size()) - 2;
  o.channels = c.shape[1];
  o.heads = 2;
  o.kernel = c.kernel;
  o.dilation = c.dilation;
  o.dtype = dt;
  o.space = space;
  o.seed = 4;
  return o;
}

inline std::vector<NeighborhoodCase> neighborhood_cases() {
  return {{{2, 4, 13}, {5}, {1}},
          {{2, 4, 13}, {4}, {2}},
          {{2, 4, 9, 8}, {3, 4}, {1, 2}},
          {{1, 4, 5, 4, 6}, {3, 2, 3}, {1}}};
}

// 3 channels, 2 heads of 4, 5 slices.
inline PhysicsAttentionOptions physics_options(int nd, DType dt, MemSpace space = MemSpace::Host) {
  PhysicsAttentionOptions o;
  o.nd = nd;
  o.channels = 3;
  o.heads = 2;
  o.head_dim = 4;
  o.slices = 5;
  o.dtype = dt;
  o.space = space;
  o.seed = 11;
  return o;
}

}  // namespace tessera::test
