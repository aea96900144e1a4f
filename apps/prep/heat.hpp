#pragma once
// Heat equation u_t = alpha * laplace(u) on the unit square or cube with u = 0 on the
// boundary, on interior nodes sharded over a mesh: explicit Euler steps of the 5- or
// 7-point Laplacian, one halo exchange per step. u0 is a Gaussian random field. Each
// node's update is the same sequence of operations at any rank count, so results are
// bitwise identical across rank counts.
#include "apps/prep/random_field.hpp"
#include "runtime/tensor/halo_tensor.hpp"

namespace tessera::prep {

struct HeatParams {
  FieldParams field;
  double alpha = 1.0;
  double cfl = 0.9;  // dt = cfl * (stability limit 1 / (2 alpha sum_d 1/h_d^2))
  int steps = 100;
};

double heat_dt(const std::vector<Index>& shape, const HeatParams& p);

struct HeatSample {
  Tensor u0, u;  // float64, owned nodes: initial and final
};

// Collective over the mesh.
HeatSample solve_heat(const Mesh& mesh, const ShardSpec& spec, const HeatParams& p,
                      std::uint64_t sample);

}  // namespace tessera::prep
