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
  TESSERA_HD void operator()(Index i) const { y[i] += b[(i / inner) % c]; }
};

// Per-channel sum of dy in double, stored as T.
template <class T>
struct BiasGrad {
  StatLayout l;  // per channel
  const T* dy;
  T* db;
  TESSERA_HD void add(Index g, Index j, double& a, double&) const {
    a += static_cast<double>(dy[l.element(g, j)]);
  }
  TESSERA_HD void store(Index g, double a, double) const { db[g] = static_cast<T>(a); }
};

}  // namespace tessera::kernels
