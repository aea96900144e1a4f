#pragma once
// Random boxes and shapes for property tests (fixed seeds: failures reproduce).
#include <random>
#include <vector>

#include "decomp/box.hpp"

namespace tessera::test {

inline Box random_box(std::mt19937& rng, int ndim, Index lo = -6, Index hi = 10) {
  std::uniform_int_distribution<Index> u(lo, hi);
  Box b;
  b.ndim = ndim;
  for (int d = 0; d < ndim; ++d) {
    Index a = u(rng), c = u(rng);
    if (a > c) std::swap(a, c);
    b.lo[d] = a;
    b.hi[d] = c;  // a == c gives an empty box now and then
  }
  return b;
}

inline std::vector<Index> random_shape(std::mt19937& rng, int ndim, Index max_extent) {
  std::uniform_int_distribution<Index> u(0, max_extent);
  std::vector<Index> s(ndim);
  for (auto& e : s) e = u(rng);
  return s;
}

}  // namespace tessera::test
