// The vectorizable float64 exponential (kernels/cpu/vec_exp.hpp) against long double expl:
// within 1.5 ulp over the whole range where e^x is a normal number, in a loop built for the
// vector units and in scalar code; the subnormal results, the overflow to inf and the
// special values as std::exp gives them.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu/vec_exp.hpp"

using tessera::kernels::cpu::exp_accurate;

namespace {

// The loop the kernels run (vectorized where the compiler can, as in the kernels).
void exp_loop(const double* x, double* y, std::size_t n) {
#pragma omp simd
  for (std::size_t i = 0; i < n; ++i) y[i] = exp_accurate(x[i]);
}

// |got - ref| in units of the last place of ref (at least the smallest subnormal).
double ulps(double got, long double ref) {
  int e = 0;
  std::frexp(static_cast<double>(ref), &e);
  const long double ulp = std::ldexp(1.0L, std::max(e - 53, -1074));
  return static_cast<double>(std::fabs(static_cast<long double>(got) - ref) / ulp);
}

}  // namespace

TEST_CASE("exp_accurate is within 1.5 ulp of expl where e^x is normal", "[vec_exp]") {
  std::mt19937_64 rng(3);
  for (const auto& [lo, hi] : std::vector<std::pair<double, double>>{
           {-708, 709}, {-40, 0}, {-0.35, 0.35}, {-708.39, -700}, {700, 709.78}, {-1e-9, 1e-9}}) {
    const std::size_t n = 200000;
    std::vector<double> x(n), y(n);
    std::uniform_real_distribution<double> u(lo, hi);
    for (double& v : x) v = u(rng);
    exp_loop(x.data(), y.data(), n);
    double worst_loop = 0, worst_scalar = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const long double ref = std::exp(static_cast<long double>(x[i]));
      worst_loop = std::max(worst_loop, ulps(y[i], ref));
      volatile double xi = x[i];  // one call at a time
      worst_scalar = std::max(worst_scalar, ulps(exp_accurate(xi), ref));
    }
    INFO("range [" << lo << ", " << hi << "]");
    CHECK(worst_loop <= 1.5);
    CHECK(worst_scalar <= 1.5);
  }
}

TEST_CASE("exp_accurate's subnormals, overflow and special values are std::exp's", "[vec_exp]") {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<double> x = {-inf,   -1e308, -1000, -745.2, -745.1,  -740,    -720, -710,
                           -708.5, -708.3, 709.5, 709.78, 709.79,  710,     1000, 1e308,
                           inf,    0.0,    -0.0,  1e-300, -1e-300, 4.9e-324};
  std::vector<double> y(x.size());
  exp_loop(x.data(), y.data(), x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double want = std::exp(x[i]);
    INFO("x = " << x[i] << ": " << y[i] << " against " << want);
    if (want == 0 || std::isinf(want)) {
      CHECK(y[i] == want);
    } else {
      // Subnormal results round twice at most: within one unit of the smallest subnormal.
      CHECK(ulps(y[i], std::exp(static_cast<long double>(x[i]))) <= 1.5);
    }
    CHECK(exp_accurate(x[i]) == y[i]);
  }
  CHECK(std::isnan(exp_accurate(nan)));
  std::vector<double> xn = {nan, 1.0}, yn(2);
  exp_loop(xn.data(), yn.data(), 2);
  CHECK(std::isnan(yn[0]));
  CHECK(yn[1] == exp_accurate(1.0));
}
