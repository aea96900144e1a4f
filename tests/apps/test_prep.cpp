// tessera-prep's generators: random inputs bitwise identical at any rank count, the
// Darcy CG pressure satisfying the discrete equations (checked by independent naive
// loops), heat steps equal to a serial reference, point clouds independent of the split.
#include <cmath>
#include <cstring>
#include <fstream>

#include "apps/prep/common.hpp"
#include "apps/prep/darcy.hpp"
#include "apps/prep/heat.hpp"
#include "apps/prep/npy.hpp"
#include "apps/prep/points.hpp"
#include "io/sharded.hpp"
#include "tests/harness/mpi_test.hpp"
#include "tests/support/helpers.hpp"
#include "tests/support/io_helpers.hpp"

using namespace tessera;
using namespace tessera::prep;

namespace {

Tensor gather(const Mesh& mesh, const ShardSpec& spec, const Tensor& local) {
  return ShardTensor::unchecked(mesh, spec, local.contiguous()).gather_all();
}

// The same computation on rank 0 alone, broadcast to every rank.
template <class F>
Tensor on_one_rank(const std::vector<Index>& shape, F&& solve) {
  Tensor out = Tensor::empty(shape, DType::f64);
  MPI_Comm one = test::first_ranks(MPI_COMM_WORLD, 1);
  if (one != MPI_COMM_NULL) {
    const Mesh mesh = Mesh::for_grid(one, shape);
    out.copy_from(solve(mesh, grid_spec(mesh, shape)));
    MPI_Comm_free(&one);
  }
  MPI_Bcast(out.raw(), static_cast<int>(out.numel()), MPI_DOUBLE, 0, MPI_COMM_WORLD);
  return out;
}

// ||f - A p|| / ||f|| by plain loops over the whole grid: k at every node and at the
// boundary nodes (index -1 and n), harmonic-mean faces, p = 0 outside.
double darcy_residual(const std::vector<Index>& shape, const Tensor& p, const DarcyParams& prm,
                      std::uint64_t sample) {
  const int nd = static_cast<int>(shape.size());
  std::vector<Index> lo(static_cast<std::size_t>(nd), -1), hi;
  for (Index n : shape) hi.push_back(n + 1);
  const Box kb(lo, hi);
  const Tensor g = gaussian_field(prm.field, sample, shape, kb);
  auto K = [&](const std::vector<Index>& i) {
    std::vector<Index> j(i);
    for (auto& v : j) v += 1;
    return std::exp(prm.sigma * g.at<double>(j));
  };
  auto P = [&](const std::vector<Index>& i) {
    for (int d = 0; d < nd; ++d)
      if (i[static_cast<std::size_t>(d)] < 0 ||
          i[static_cast<std::size_t>(d)] >= shape[static_cast<std::size_t>(d)])
        return 0.0;
    return p.at<double>(i);
  };
  double r2 = 0, f2 = 0;
  std::vector<Index> i(static_cast<std::size_t>(nd));
  for (Index c = 0; c < p.numel(); ++c) {
    delinearize(Box::from_shape(shape), c, i.data());
    double ap = 0;
    for (int d = 0; d < nd; ++d) {
      const double h = 1.0 / static_cast<double>(shape[static_cast<std::size_t>(d)] + 1);
      for (int s : {-1, 1}) {
        std::vector<Index> j(i);
        j[static_cast<std::size_t>(d)] += s;
        const double kf = 2 * K(i) * K(j) / (K(i) + K(j));
        ap += kf * (P(i) - P(j)) / (h * h);
      }
    }
    r2 += (prm.source - ap) * (prm.source - ap);
    f2 += prm.source * prm.source;
  }
  return std::sqrt(r2 / f2);
}

double rel_diff(const Tensor& a, const Tensor& b) {
  double d = 0, n = 0;
  for (Index i = 0; i < a.numel(); ++i) {
    const double x = a.data<double>()[i], y = b.data<double>()[i];
    d += (x - y) * (x - y);
    n += y * y;
  }
  return std::sqrt(d / n);
}

}  // namespace

TEST_CASE("Darcy: random k bitwise identical at any rank count, CG solves the equations",
          "[prep][darcy]") {
  for (const std::vector<Index>& shape :
       {std::vector<Index>{24, 19}, std::vector<Index>{9, 10, 7}}) {
    DarcyParams prm;
    prm.tol = 1e-10;
    prm.field.seed = 42;
    prm.field.modes = shape.size() == 2 ? 5 : 3;
    const Mesh mesh = Mesh::for_grid(MPI_COMM_WORLD, shape);
    const ShardSpec spec = grid_spec(mesh, shape);
    for (std::uint64_t sample : {0u, 3u}) {
      const DarcySample s = solve_darcy(mesh, spec, prm, sample);
      const Tensor k = gather(mesh, spec, s.k.interior());
      const Tensor p = gather(mesh, spec, s.p);
      // k from the same generator evaluated serially over the whole grid.
      const Tensor g = gaussian_field(prm.field, sample, shape, Box::from_shape(shape));
      bool k_same = true;
      for (Index i = 0; i < g.numel(); ++i)
        k_same = k_same && k.data<double>()[i] == std::exp(prm.sigma * g.data<double>()[i]);
      INFO("shape " << shape_str(shape) << " sample " << sample << " iterations " << s.iterations
                    << " solver residual " << s.residual);
      MPI_REQUIRE(k_same);
      const double res = darcy_residual(shape, p, prm, sample);
      INFO("independent residual " << res);
      MPI_REQUIRE(res <= 1.5 * prm.tol);
      MPI_REQUIRE(s.iterations > 1);
      // The pressure is positive inside (f > 0, p = 0 on the boundary).
      bool positive = true;
      for (Index i = 0; i < p.numel(); ++i) positive = positive && p.data<double>()[i] > 0;
      MPI_REQUIRE(positive);
      // One rank's solution agrees to the tolerance's reach.
      const Tensor p1 = on_one_rank(shape, [&](const Mesh& m1, const ShardSpec& s1) {
        return solve_darcy(m1, s1, prm, sample).p;
      });
      INFO("relative difference to 1 rank " << rel_diff(p, p1));
      MPI_REQUIRE(rel_diff(p, p1) < 1e-7);
    }
  }
}

TEST_CASE("A different seed or sample gives a different field; statistics are sane", "[prep]") {
  const std::vector<Index> shape = {64, 64};
  FieldParams a;
  const Tensor g0 = gaussian_field(a, 0, shape, Box::from_shape(shape));
  const Tensor g1 = gaussian_field(a, 1, shape, Box::from_shape(shape));
  a.seed = 2;
  const Tensor g2 = gaussian_field(a, 0, shape, Box::from_shape(shape));
  MPI_REQUIRE(!test::same(g0, g1));
  MPI_REQUIRE(!test::same(g0, g2));
  // Unit variance in expectation: the sample variance over 3 fields lies near 1.
  double s = 0, s2 = 0;
  for (const Tensor* t : {&g0, &g1, &g2})
    for (Index i = 0; i < t->numel(); ++i)
      s += t->data<double>()[i], s2 += t->data<double>()[i] * t->data<double>()[i];
  const double n = 3.0 * static_cast<double>(g0.numel()), var = s2 / n - (s / n) * (s / n);
  INFO("variance " << var);
  MPI_REQUIRE(var > 0.2);
  MPI_REQUIRE(var < 3.0);
}

TEST_CASE("Heat: explicit steps equal a serial reference, bitwise across rank counts",
          "[prep][heat]") {
  for (const std::vector<Index>& shape :
       {std::vector<Index>{20, 17}, std::vector<Index>{8, 9, 10}}) {
    HeatParams prm;
    prm.steps = 25;
    prm.field.modes = 3;
    const Mesh mesh = Mesh::for_grid(MPI_COMM_WORLD, shape);
    const ShardSpec spec = grid_spec(mesh, shape);
    const HeatSample s = solve_heat(mesh, spec, prm, 1);
    const Tensor u = gather(mesh, spec, s.u);
    // Serial reference: plain loops over the whole grid, zero outside.
    const int nd = static_cast<int>(shape.size());
    Tensor ref = gaussian_field(prm.field, 1, shape, Box::from_shape(shape));
    const double dt = heat_dt(shape, prm);
    std::vector<Index> i(static_cast<std::size_t>(nd));
    for (int step = 0; step < prm.steps; ++step) {
      Tensor next = Tensor::empty(shape, DType::f64);
      for (Index c = 0; c < ref.numel(); ++c) {
        delinearize(Box::from_shape(shape), c, i.data());
        double lap = 0;
        for (int d = 0; d < nd; ++d) {
          const auto dd = static_cast<std::size_t>(d);
          const double h = 1.0 / static_cast<double>(shape[dd] + 1);
          double nb = 0;
          for (int sgn : {-1, 1}) {
            std::vector<Index> j(i);
            j[dd] += sgn;
            if (j[dd] >= 0 && j[dd] < shape[dd]) nb += ref.at<double>(j);
          }
          lap += (nb - 2 * ref.at<double>(i)) / (h * h);
        }
        next.data<double>()[c] = ref.data<double>()[c] + dt * prm.alpha * lap;
      }
      ref = next;
    }
    INFO("shape " << shape_str(shape) << " difference to serial " << rel_diff(u, ref));
    MPI_REQUIRE(rel_diff(u, ref) < 1e-13);
    // Diffusion with zero boundaries shrinks the field.
    const Tensor u0 = gather(mesh, spec, s.u0);
    double n0 = 0, n1 = 0;
    for (Index c = 0; c < u.numel(); ++c)
      n0 += u0.data<double>()[c] * u0.data<double>()[c],
          n1 += u.data<double>()[c] * u.data<double>()[c];
    MPI_REQUIRE(n1 < n0);
    const Tensor u1 = on_one_rank(
        shape, [&](const Mesh& m1, const ShardSpec& s1) { return solve_heat(m1, s1, prm, 1).u; });
    MPI_REQUIRE(test::same(u, u1));
  }
}

TEST_CASE("Point clouds do not depend on how points are split over ranks", "[prep][points]") {
  for (const char* surface : {"torus", "sphere"}) {
    PointsParams p;
    p.surface = surface;
    p.noise = 0.0;
    const Index P = 1000;
    std::vector<float> xyz(3 * P), f(P), xyz2(3 * P), f2(P);
    make_points(p, 3, 0, P, xyz.data(), f.data());
    for (Index b = 0; b < P; b += 137) {
      const Index e = std::min(P, b + 137);
      make_points(p, 3, b, e, xyz2.data() + 3 * b, f2.data() + b);
    }
    bool same = std::memcmp(xyz.data(), xyz2.data(), xyz.size() * 4) == 0 &&
                std::memcmp(f.data(), f2.data(), f.size() * 4) == 0;
    // Without noise every point lies on the surface (to float32 rounding): the unit
    // sphere, or a torus of major radius 1 whose tube radius (0.3 to 0.4) is the same
    // for every point.
    double worst = 0, tmin = 1e9, tmax = -1e9;
    for (Index j = 0; j < P; ++j) {
      const double x = xyz[3 * j], y = xyz[3 * j + 1], z = xyz[3 * j + 2];
      const double rho = std::sqrt(x * x + y * y), tube = std::sqrt((rho - 1) * (rho - 1) + z * z);
      tmin = std::min(tmin, tube);
      tmax = std::max(tmax, tube);
      if (std::string(surface) == "sphere")
        worst = std::max(worst, std::abs(std::sqrt(x * x + y * y + z * z) - 1.0));
    }
    if (std::string(surface) == "torus") {
      worst = tmax - tmin;
      MPI_REQUIRE(tmin >= 0.3 - 1e-6);
      MPI_REQUIRE(tmax <= 0.4 + 1e-6);
    }
    INFO(surface << " worst distance " << worst);
    MPI_REQUIRE(same);
    MPI_REQUIRE(worst < 1e-6);
  }
}

TEST_CASE("A .npy header round trip", "[prep][npy]") {
  const std::string path =
      test::temp_file(MPI_COMM_WORLD, "npy") + std::to_string(test::world_rank()) + ".npy";
  {
    std::ofstream out(path, std::ios::binary);
    out << npy_header_bytes("<f8", {2, 3, 4});
    const std::vector<double> v(24, 1.5);
    out.write(reinterpret_cast<const char*>(v.data()), 24 * 8);
  }
  const NpyHeader h = read_npy_header(path);
  MPI_REQUIRE(h.descr == "<f8");
  MPI_REQUIRE((h.shape == std::vector<Index>{2, 3, 4}));
  MPI_REQUIRE(h.data_offset % 64 == 0);
  MPI_REQUIRE(h.elem_size == 8);
  MPI_REQUIRE(!h.fortran_order);
  std::filesystem::remove(path);
}
