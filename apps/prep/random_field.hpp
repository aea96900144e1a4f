#pragma once
// Gaussian random fields on the unit square or cube as a random Fourier-mode sum,
//   g(x) = sum_k sqrt(S(k)) (xi_k cos(2 pi k.x) + eta_k sin(2 pi k.x)) / norm,
// over integer wave vectors |k_d| <= K, with S(k) = (1 + |k|^2 / l^2)^-alpha and
// (xi_k, eta_k) standard normal draws keyed by (seed, sample, mode). Each cell's value
// is a fixed sequence of operations on its own coordinates, so it is bitwise identical
// on any rank at any rank count, inside the domain and at ghost or boundary points.
#include <cstdint>
#include <vector>

#include "decomp/box.hpp"
#include "runtime/tensor/tensor.hpp"

namespace tessera::prep {

struct FieldParams {
  std::uint64_t seed = 1;
  std::uint32_t stream = 0;  // independent fields of the same sample
  int modes = 6;             // K: wave numbers -K..K per dim
  double length = 3.0;       // l: spectral length scale (in wave numbers)
  double alpha = 2.0;        // spectral decay
};

// Node coordinates of a grid of `shape` interior nodes on [0, 1]^d with the boundary at
// index -1 and shape[d]: x = (i + 1) / (shape[d] + 1).
double node_coord(Index i, Index n);

// g at every node of `box` (global node indices, may extend one past the domain into
// the boundary), as a float64 tensor of box's shape; unit variance.
Tensor gaussian_field(const FieldParams& p, std::uint64_t sample, const std::vector<Index>& shape,
                      const Box& box);

}  // namespace tessera::prep
