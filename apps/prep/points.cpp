#include "apps/prep/points.hpp"

#include <cmath>

#include "apps/prep/philox.hpp"
#include "decomp/error.hpp"

namespace tessera::prep {

void make_points(const PointsParams& p, std::uint64_t sample, Index begin, Index end, float* coords,
                 float* value) {
  const double two_pi = 6.283185307179586;
  // Per-sample shape and field parameters (item ~0: not a point index).
  const Draw s = uniform2(p.seed, sample, ~std::uint64_t(0), 7);
  const Draw t = uniform2(p.seed, sample, ~std::uint64_t(0), 8);
  const double minor = 0.3 + 0.1 * s.u[0], phase_a = two_pi * s.u[1], phase_b = two_pi * t.u[0];
  const int k1 = 1 + static_cast<int>(3 * t.u[1]), k2 = 2;
  if (p.surface != "torus" && p.surface != "sphere")
    throw Error("unknown surface '" + p.surface + "' (torus or sphere)");
  for (Index j = begin; j < end; ++j) {
    const auto u = static_cast<std::uint64_t>(j);
    const Draw a = uniform2(p.seed, sample, u, 1);
    const double eps = p.noise * gaussian2(p.seed, sample, u, 2)[0];
    double x, y, z, f;
    if (p.surface == "torus") {
      const double th = two_pi * a.u[0], ph = two_pi * a.u[1];
      const double r = minor + eps;  // noise along the tube's normal
      x = (1.0 + r * std::cos(ph)) * std::cos(th);
      y = (1.0 + r * std::cos(ph)) * std::sin(th);
      z = r * std::sin(ph);
      f = std::sin(k1 * th + phase_a) * std::cos(k2 * ph + phase_b);
    } else {
      const double zc = 2.0 * a.u[0] - 1.0, th = two_pi * a.u[1];  // uniform on the sphere
      const double rho = std::sqrt(std::max(0.0, 1.0 - zc * zc)), r = 1.0 + eps;
      x = r * rho * std::cos(th);
      y = r * rho * std::sin(th);
      z = r * zc;
      f = x * y + std::sin(k1 * z + phase_a);
    }
    const Index o = j - begin;
    coords[3 * o] = static_cast<float>(x);
    coords[3 * o + 1] = static_cast<float>(y);
    coords[3 * o + 2] = static_cast<float>(z);
    value[o] = static_cast<float>(f);
  }
}

}  // namespace tessera::prep
