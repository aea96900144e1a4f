#pragma once
// Random host tensors every rank can build in full from a seed, and element reads across
// float32 and float64: shared by both layer-check headers so they draw the same values.
#include <random>
#include <vector>

#include "runtime/tensor/tensor.hpp"

namespace tessera::test {

// Uniform values in [lo, hi), drawn from `rng` (which advances).
template <class Rng>
Tensor random_tensor(Rng& rng, const std::vector<Index>& shape, DType dt, double lo = -1.0,
                     double hi = 1.0) {
  std::uniform_real_distribution<double> u(lo, hi);
  Tensor t = Tensor::empty(shape, dt);
  for (Index i = 0; i < t.numel(); ++i) {
    if (dt == DType::f64)
      t.data<double>()[i] = u(rng);
    else
      t.data<float>()[i] = static_cast<float>(u(rng));
  }
  return t;
}

// Uniform values in [lo, hi), the same on every rank for the same seed.
inline Tensor random_tensor(const std::vector<Index>& shape, DType dt, unsigned seed,
                            double lo = -1.0, double hi = 1.0) {
  std::mt19937_64 rng(seed);
  return random_tensor(rng, shape, dt, lo, hi);
}

inline double value_at(const Tensor& t, Index i) {
  return t.dtype() == DType::f64 ? t.data<double>()[i] : t.data<float>()[i];
}

}  // namespace tessera::test
