#pragma once
// OpenMP drivers of the element functors shared with the CUDA kernels: a parallel loop
// over elements, and a per-group reduction (each group summed serially in double, groups
// in parallel) for functors with add(g, j, a, b) and store(g, a, b).
#include "decomp/box.hpp"

namespace tessera::kernels {

template <class F>
void host_for_each(Index n, const F& f) {
#pragma omp parallel for schedule(static)
  for (Index i = 0; i < n; ++i) f(i);
}

template <class R>
void host_group_reduce(Index groups, Index size, const R& r) {
#pragma omp parallel for schedule(static)
  for (Index g = 0; g < groups; ++g) {
    double a = 0, b = 0;
    for (Index j = 0; j < size; ++j) r.add(g, j, a, b);
    r.store(g, a, b);
  }
}

}  // namespace tessera::kernels
