#include "apps/prep/heat.hpp"

#include "runtime/comm/halo_exchange.hpp"

namespace tessera::prep {

double heat_dt(const std::vector<Index>& shape, const HeatParams& p) {
  double s = 0;
  for (Index n : shape) s += static_cast<double>((n + 1) * (n + 1));  // 1 / h^2
  return p.cfl / (2.0 * p.alpha * s);
}

HeatSample solve_heat(const Mesh& mesh, const ShardSpec& spec, const HeatParams& p,
                      std::uint64_t sample) {
  const int nd = spec.ndim();
  const std::vector<Index> one(static_cast<std::size_t>(nd), 1);
  HaloTensor u(mesh, spec, one, one, DType::f64), v(mesh, spec, one, one, DType::f64);
  const Box own = u.interior_box();
  HeatSample out;
  out.u0 = gaussian_field(p.field, sample, spec.global_shape(), own);
  u.interior().copy_from(out.u0);
  HaloExchange ex(mesh, spec, one, one);  // open boundaries: ghosts 0 (Dirichlet)
  const double dt = heat_dt(spec.global_shape(), p);
  double c[3] = {0, 0, 0};
  Index st[3] = {0, 0, 0}, ext[3] = {1, 1, 1};
  const auto& strides = u.padded().strides();
  for (int d = 0; d < nd; ++d) {
    const double n1 = static_cast<double>(spec.global_shape()[static_cast<std::size_t>(d)] + 1);
    c[d] = p.alpha * dt * n1 * n1;
    st[d] = strides[static_cast<std::size_t>(d)];
    ext[d] = own.extent(d);
  }
  Index base = 0;
  for (int d = 0; d < nd; ++d) base += st[d];  // left width 1 in every dim
  HaloTensor* a = &u;
  HaloTensor* b = &v;
  for (int s = 0; s < p.steps; ++s) {
    ex.exchange(*a);
    const double* x = a->padded().data<double>();
    double* y = b->padded().data<double>();
    for (Index i = 0; i < ext[0]; ++i)
      for (Index j = 0; j < ext[1]; ++j)
        for (Index l = 0; l < ext[2]; ++l) {
          const Index o = base + i * st[0] + j * st[1] + l * st[2];
          double lap = 0;
          for (int d = 0; d < nd; ++d) lap += c[d] * (x[o + st[d]] - 2.0 * x[o] + x[o - st[d]]);
          y[o] = x[o] + lap;
        }
    std::swap(a, b);
  }
  out.u = a->interior().clone();
  return out;
}

}  // namespace tessera::prep
