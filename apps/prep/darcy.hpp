#pragma once
// Darcy flow -div(k grad p) = f on the unit square or cube, p = 0 on the boundary,
// on a grid of interior nodes sharded over a mesh. k = exp(sigma * g) with g a Gaussian
// random field. The 5-point (2-D) or 7-point (3-D) stencil uses harmonic means of k
// on faces; k is evaluated on each rank's padded box (boundary nodes included), so
// the operator is symmetric positive definite and the same on any rank count. The
// pressure comes from Jacobi-preconditioned conjugate gradients: one halo exchange
// per matrix-vector product, MPI_Allreduce for the dot products.
#include <cmath>
#include <cstdint>

#include "apps/prep/random_field.hpp"
#include "runtime/comm/halo_exchange.hpp"

namespace tessera::prep {

struct DarcyParams {
  FieldParams field;
  double sigma = 1.0;   // log-permeability standard deviation
  double source = 1.0;  // f
  double tol = 1e-8;    // relative residual ||f - A p|| / ||f||
  int max_iter = 20000;
};

struct DarcySample {
  HaloTensor k;  // float64 permeability on the padded box (ghosts: neighbours' or boundary k)
  Tensor p;      // float64 pressure on the owned nodes
  int iterations = 0;
  double residual = 0;  // relative, as the solver computed it
  // The permeability's range over every rank's padded box; CG does not run (iterations 0,
  // residual NaN) when exp(sigma g) overflowed to inf or underflowed to 0.
  double k_min = 0, k_max = 0;
  // The smallest relative residual CG reached, and at which iteration: a solve that stopped
  // at max_iter while still reaching new lows may need more iterations; one whose best lies
  // long behind it, after more iterations than unknowns (where CG in exact arithmetic has
  // converged), is lost to round-off: more iterations do not help.
  double best_residual = 0;
  int best_iteration = 0;
  bool k_overflow() const { return !(k_min > 0) || !(k_max < HUGE_VAL); }
  bool still_falling() const;
};

// Collective over the mesh. `spec` shards the spatial grid (2-D or 3-D, sizes = nodes).
DarcySample solve_darcy(const Mesh& mesh, const ShardSpec& spec, const DarcyParams& p,
                        std::uint64_t sample);

// y = A x on the owned nodes (x a width-1 HaloTensor whose ghosts are exchanged here).
void darcy_apply(const HaloTensor& k, HaloTensor& x, const Tensor& y, HaloExchange& ex);

}  // namespace tessera::prep
