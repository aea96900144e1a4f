#include "apps/prep/darcy.hpp"

#include <algorithm>
#include <cmath>

#include "runtime/comm/halo_exchange.hpp"

namespace tessera::prep {
namespace {

double harmonic(double a, double b) {
  return 2.0 * a * b / (a + b);
}

// Strides of the padded buffer, and the owned nodes walked as padded offsets.
struct Layout {
  int nd = 0;
  Index ext[3] = {1, 1, 1};     // owned extents
  Index stride[3] = {0, 0, 0};  // padded strides
  Index base = 0;               // padded offset of the first owned node
  double inv_h2[3] = {0, 0, 0};
};

Layout layout_of(const HaloTensor& t) {
  Layout L;
  L.nd = t.padded().ndim();
  const auto& ps = t.padded().strides();
  const auto& g = t.spec().global_shape();
  for (int d = 0; d < L.nd; ++d) {
    L.ext[d] = t.interior_box().extent(d);
    L.stride[d] = ps[static_cast<std::size_t>(d)];
    L.base += t.left()[static_cast<std::size_t>(d)] * ps[static_cast<std::size_t>(d)];
    const double h = 1.0 / static_cast<double>(g[static_cast<std::size_t>(d)] + 1);
    L.inv_h2[d] = 1.0 / (h * h);
  }
  return L;
}

template <class F>
void for_owned(const Layout& L, F&& f) {
  const Index n0 = L.ext[0], n1 = L.nd > 1 ? L.ext[1] : 1, n2 = L.nd > 2 ? L.ext[2] : 1;
  Index c = 0;
  for (Index i = 0; i < n0; ++i)
    for (Index j = 0; j < n1; ++j)
      for (Index l = 0; l < n2; ++l, ++c)
        f(c, L.base + i * L.stride[0] + j * (L.nd > 1 ? L.stride[1] : 0) +
                 l * (L.nd > 2 ? L.stride[2] : 0));
}

}  // namespace

bool DarcySample::still_falling() const {
  // A new lowest residual in the last half of the iterations. CG's residual norm is far from
  // monotone (it rose a hundred-thousandfold before converging in our runs), so only a long
  // trend says anything.
  return std::isfinite(residual) && best_iteration > 0 && 2 * best_iteration > iterations;
}

void darcy_apply(const HaloTensor& k, HaloTensor& x, const Tensor& y, HaloExchange& ex) {
  ex.exchange(x);
  const Layout L = layout_of(x);
  const double* kk = k.padded().data<double>();
  const double* xx = x.padded().data<double>();
  double* yy = y.data<double>();
  for_owned(L, [&](Index c, Index o) {
    double s = 0;
    for (int d = 0; d < L.nd; ++d) {
      const Index st = L.stride[d];
      s += L.inv_h2[d] * (harmonic(kk[o], kk[o + st]) * (xx[o] - xx[o + st]) +
                          harmonic(kk[o], kk[o - st]) * (xx[o] - xx[o - st]));
    }
    yy[c] = s;
  });
}

DarcySample solve_darcy(const Mesh& mesh, const ShardSpec& spec, const DarcyParams& prm,
                        std::uint64_t sample) {
  const int nd = spec.ndim();
  const std::vector<Index> one(static_cast<std::size_t>(nd), 1);
  DarcySample out;
  out.k = HaloTensor(mesh, spec, one, one, DType::f64);
  // k on the whole padded box, boundary nodes included: no exchange needed for k.
  const Tensor g = gaussian_field(prm.field, sample, spec.global_shape(), out.k.padded_box());
  {
    double* k = out.k.padded().data<double>();
    const double* gg = g.data<double>();
    double range[2] = {HUGE_VAL, HUGE_VAL};  // min k, -max k
    for (Index i = 0; i < g.numel(); ++i) {
      k[i] = std::exp(prm.sigma * gg[i]);
      range[0] = std::min(range[0], k[i]);
      range[1] = std::min(range[1], -k[i]);
    }
    MPI_Allreduce(MPI_IN_PLACE, range, 2, MPI_DOUBLE, MPI_MIN, mesh.comm());
    out.k_min = range[0];
    out.k_max = -range[1];
  }
  if (out.k_overflow()) {  // inf or 0 in the stencil: no solve to attempt (the caller says why)
    out.p = Tensor::zeros(out.k.interior_box().shape(), DType::f64);
    out.residual = NAN;
    return out;
  }
  HaloExchange ex(mesh, spec, one, one);  // open boundaries: ghost p = 0 (Dirichlet)
  const Layout L = layout_of(out.k);
  const Box own = out.k.interior_box();
  const std::vector<Index> shape = own.shape();
  Tensor x = Tensor::zeros(shape, DType::f64), r = Tensor::empty(shape, DType::f64),
         z = Tensor::empty(shape, DType::f64), q = Tensor::empty(shape, DType::f64),
         inv_diag = Tensor::empty(shape, DType::f64);
  HaloTensor dir(mesh, spec, one, one, DType::f64);
  const double* kk = out.k.padded().data<double>();
  for_owned(L, [&](Index c, Index o) {
    double s = 0;
    for (int d = 0; d < L.nd; ++d)
      s += L.inv_h2[d] *
           (harmonic(kk[o], kk[o + L.stride[d]]) + harmonic(kk[o], kk[o - L.stride[d]]));
    inv_diag.data<double>()[c] = 1.0 / s;
    r.data<double>()[c] = prm.source;  // r = f - A 0
  });
  const MPI_Comm comm = mesh.comm();
  double* xx = x.data<double>();
  double* rr = r.data<double>();
  double* zz = z.data<double>();
  double* qq = q.data<double>();
  const double* id = inv_diag.data<double>();
  double* D = dir.padded().data<double>();  // same padded layout as k
  const Index n = x.numel();
  // (r.z, r.r) in one all-reduce.
  auto precondition_and_dots = [&](double& rz, double& rr2) {
    double s[2] = {0, 0}, t[2] = {0, 0};
    for (Index i = 0; i < n; ++i) {
      zz[i] = id[i] * rr[i];
      s[0] += rr[i] * zz[i];
      s[1] += rr[i] * rr[i];
    }
    MPI_Allreduce(s, t, 2, MPI_DOUBLE, MPI_SUM, comm);
    rz = t[0];
    rr2 = t[1];
  };
  double rz = 0, rr2 = 0;
  precondition_and_dots(rz, rr2);
  const double bnorm = std::sqrt(rr2);
  double rnorm = bnorm;
  for_owned(L, [&](Index c, Index o) { D[o] = zz[c]; });
  int it = 0;
  out.best_residual = bnorm > 0 ? 1.0 : 0.0;
  while (it < prm.max_iter && rnorm > prm.tol * bnorm) {
    darcy_apply(out.k, dir, q, ex);
    double pq = 0;
    for_owned(L, [&](Index c, Index o) { pq += D[o] * qq[c]; });
    double pq_all = 0;
    MPI_Allreduce(&pq, &pq_all, 1, MPI_DOUBLE, MPI_SUM, comm);
    const double alpha = rz / pq_all;
    for_owned(L, [&](Index c, Index o) {
      xx[c] += alpha * D[o];
      rr[c] -= alpha * qq[c];
    });
    double rz_new = 0;
    precondition_and_dots(rz_new, rr2);
    rnorm = std::sqrt(rr2);
    const double beta = rz_new / rz;
    rz = rz_new;
    for_owned(L, [&](Index c, Index o) { D[o] = zz[c] + beta * D[o]; });
    ++it;
    if (rnorm / bnorm < out.best_residual) {
      out.best_residual = rnorm / bnorm;
      out.best_iteration = it;
    }
  }
  out.p = x;
  out.iterations = it;
  out.residual = bnorm > 0 ? rnorm / bnorm : 0;
  return out;
}

}  // namespace tessera::prep
