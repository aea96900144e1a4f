#pragma once
// OpenMP drivers of the element functors shared with the CUDA kernels: a parallel loop
// over elements (or over the rows of a statistics layout), and a per-group reduction for
// functors with add(g, j, a, b) (or add_cell(cell, g, a, b) and walk(), the layout whose
// groups g are) and store(g, a, b). Groups are cut into fixed chunks of kReduceChunk cells, summed
// in parallel, and the chunk partials of a group are added in order, so few large groups
// (BatchNorm's channels) still use every thread and the result does not depend on the
// thread count.
#include "kernels/floor.hpp"
#include <vector>

#include "decomp/box.hpp"
#include "kernels/stat_layout.hpp"

namespace tessera::kernels {

inline constexpr Index kReduceChunk = Index{1} << 14;

template <class F>
void host_for_each(Index n, const F& f) {
#pragma omp parallel for schedule(static)
  for (Index i = 0; i < n; ++i) f(i);
}

// A loop over the cells of `l`'s layout row by row - (sample, channel) rows of `inner`
// positions - calling f.at(e, ch, g) with the cell's channel and group, so the inner loop
// has no division (host_for_each's functors decode each index).
template <class F>
void host_for_each_cell(const StatLayout& l, const F& f) {
#pragma omp parallel for schedule(static)
  for (Index r = 0; r < l.n * l.c; ++r) {
    const Index nn = r / l.c, ch = r % l.c, e0 = r * l.inner;
    if (l.kind == StatKind::PerPosition) {
      for (Index s = 0; s < l.inner; ++s) f.at(e0 + s, ch, nn * l.inner + s);
    } else {
      const Index g = l.group_at(nn, ch, 0);
      for (Index s = 0; s < l.inner; ++s) f.at(e0 + s, ch, g);
    }
  }
}

template <class R>
void host_group_reduce(Index groups, Index size, const R& r) {
  if (groups <= 0) return;
  const Index chunks = size > kReduceChunk ? (size + kReduceChunk - 1) / kReduceChunk : 1;
  std::vector<double> pa(static_cast<std::size_t>(groups * chunks)), pb(pa.size());
#pragma omp parallel for schedule(static)
  for (Index w = 0; w < groups * chunks; ++w) {
    const Index g = w / chunks, lo = (w % chunks) * kReduceChunk;
    const Index hi = lo + kReduceChunk < size ? lo + kReduceChunk : size;
    double a = 0, b = 0;
    if constexpr (requires { r.add_cell(StatLayout::Cell{}, g, a, b); }) {
      // The same cells in the same order, walked without a division per cell.
      const StatLayout& l = r.walk();
      StatLayout::Cell k = l.cell(g, lo);
      for (Index j = lo; j < hi; ++j, l.next(k)) r.add_cell(k, g, a, b);
    } else {
      for (Index j = lo; j < hi; ++j) r.add(g, j, a, b);
    }
    pa[w] = a;
    pb[w] = b;
  }
#pragma omp parallel for schedule(static)
  for (Index g = 0; g < groups; ++g) {
    double a = 0, b = 0;
    for (Index k = 0; k < chunks; ++k) {
      a += pa[g * chunks + k];
      b += pb[g * chunks + k];
    }
    r.store(g, a, b);
  }
}

}  // namespace tessera::kernels
