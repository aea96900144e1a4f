#pragma once
// OpenMP drivers of the element functors shared with the CUDA kernels: a parallel loop
// over elements (or over the rows of a statistics layout), and a per-group reduction for
// functors with walk() (the statistics layout whose groups g are), add_cell(cell, g, a, b)
// (add(g, j, a, b) on the device) and store(g, a, b). Groups are cut into fixed chunks of
// kReduceChunk cells, summed in parallel, and the chunk partials of a group are added in
// order, so few large groups (BatchNorm's channels) still use every thread and the result
// does not depend on the thread count.
#include "kernels/floor.hpp"
#include <vector>

#include "decomp/box.hpp"
#include "kernels/spatial_index.hpp"
#include "kernels/stat_layout.hpp"

namespace tessera::kernels {

inline constexpr Index kReduceChunk = Index{1} << 14;

// One dim of a window kernel's backward gather, tabulated once per call: for each input
// cell pl of the window (0 .. n-1), the output offsets within the output window that read
// it, with their weights, in the order visit(pl, add) adds them (add(offset, weight)).
struct DimReaders {
  std::vector<std::size_t> first;  // entries [first[pl], first[pl + 1]) of cell pl
  std::vector<Index> out;
  std::vector<double> w;
  template <class Visit>
  DimReaders(Index n, const Visit& visit) {
    const auto add = [this](Index o, double weight) {
      out.push_back(o);
      w.push_back(weight);
    };
    for (Index pl = 0; pl < n; ++pl) {
      first.push_back(out.size());
      visit(pl, add);
    }
    first.push_back(out.size());
  }
  std::size_t begin(Index pl) const { return first[static_cast<std::size_t>(pl)]; }
  std::size_t end(Index pl) const { return first[static_cast<std::size_t>(pl) + 1]; }
};

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

// A loop over the cells of an (n, c, ext[0], ext[1], ext[2]) block, row by row of ext[2]
// cells: f.at(i, nn, cc, cell) with i the linear index and cell the spatial coordinates
// plus `origin` (if given), decoded once per row instead of once per cell (unravel_nc3).
template <class F>
void host_for_each_nc3(Index n, Index c, const Index ext[3], const Index* origin, const F& f) {
  if (ext[2] <= 0) return;  // no cells (and no row to decode)
  const Index rows = n * c * ext[0] * ext[1];
#pragma omp parallel for schedule(static)
  for (Index r = 0; r < rows; ++r) {
    Index cell[3], cc, nn;
    unravel_nc3(r * ext[2], c, ext, cell, cc, nn, origin);  // the row's first cell
    for (Index e = 0; e < ext[2]; ++e, ++cell[2]) f.at(r * ext[2] + e, nn, cc, cell);
  }
}

// Per-position groups (channel LayerNorm: one group per (sample, position), reduced over
// the channels) for a run of positions at once: channels outer, positions inner (contiguous,
// so the loop vectorizes), each group's sum still in the order of its channels.
template <class R>
void host_position_reduce(const StatLayout& l, const R& r) {
  constexpr Index kBlock = 64;
  const Index blocks = (l.inner + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static)
  for (Index w = 0; w < l.n * blocks; ++w) {
    const Index nn = w / blocks, s0 = (w % blocks) * kBlock;
    const Index m = l.inner - s0 < kBlock ? l.inner - s0 : kBlock, g0 = nn * l.inner + s0;
    double a[kBlock] = {}, b[kBlock] = {};
    for (Index ch = 0; ch < l.c; ++ch) {
      const Index e0 = (nn * l.c + ch) * l.inner + s0;
      for (Index t = 0; t < m; ++t)
        r.add_cell(StatLayout::Cell{e0 + t, nn, ch, s0 + t}, g0 + t, a[t], b[t]);
    }
    for (Index t = 0; t < m; ++t) r.store(g0 + t, a[t], b[t]);
  }
}

template <class R>
void host_group_reduce(Index groups, Index size, const R& r) {
  if (groups <= 0) return;
  const StatLayout& l = r.walk();
  if (l.kind == StatKind::PerPosition && size <= kReduceChunk)  // one chunk per group
    return host_position_reduce(l, r);
  const Index chunks = size > kReduceChunk ? (size + kReduceChunk - 1) / kReduceChunk : 1;
  std::vector<double> pa(static_cast<std::size_t>(groups * chunks)), pb(pa.size());
#pragma omp parallel for schedule(static)
  for (Index w = 0; w < groups * chunks; ++w) {
    const Index g = w / chunks, lo = (w % chunks) * kReduceChunk;
    const Index hi = lo + kReduceChunk < size ? lo + kReduceChunk : size;
    double a = 0, b = 0;
    // The cells of add(g, j) in order of j, walked without a division per cell.
    StatLayout::Cell k = l.cell(g, lo);
    for (Index j = lo; j < hi; ++j, l.next(k)) r.add_cell(k, g, a, b);
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
