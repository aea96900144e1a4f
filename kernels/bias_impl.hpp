#pragma once
// Bias element functions shared by the OpenMP loops and the CUDA kernels.
#include "kernels/floor.hpp"
#include "kernels/stat_layout.hpp"

namespace tessera::kernels {

template <class T>
struct BiasAdd {
  Index c, inner;
  T* y;
  const T* b;
  TESSERA_HD void operator()(Index i) const { at(i, (i / inner) % c, 0); }
  TESSERA_HD void at(Index i, Index ch, Index) const { y[i] += b[ch]; }
};

// Per-channel sum of dy in double, stored as T.
template <class T>
struct BiasGrad {
  StatLayout l;  // per channel
  const T* dy;
  T* db;
  TESSERA_HD const StatLayout& walk() const { return l; }
  TESSERA_HD void add(Index g, Index j, double& a, double& b) const {
    add_cell(l.cell(g, j), g, a, b);
  }
  TESSERA_HD void add_cell(const StatLayout::Cell& k, Index, double& a, double&) const {
    a += static_cast<double>(dy[k.e]);
  }
  TESSERA_HD void store(Index g, double a, double) const { db[g] = static_cast<T>(a); }
};

}  // namespace tessera::kernels
