#pragma once
// Reduction element functions shared by the OpenMP loops and the CUDA kernels.
#include "kernels/floor.hpp"
#include "kernels/stat_layout.hpp"

namespace tessera::kernels {

template <class T>
struct StatSums {
  StatLayout l;
  const T* x;
  double* sum;
  double* sumsq;  // may be null
  TESSERA_HD const StatLayout& walk() const { return l; }
  TESSERA_HD void add(Index g, Index j, double& a, double& b) const {
    add_cell(l.cell(g, j), g, a, b);
  }
  TESSERA_HD void add_cell(const StatLayout::Cell& k, Index, double& a, double& b) const {
    const double v = static_cast<double>(x[k.e]);
    a += v;
    b += v * v;
  }
  TESSERA_HD void store(Index g, double a, double b) const {
    sum[g] = a;
    if (sumsq) sumsq[g] = b;
  }
};

}  // namespace tessera::kernels
