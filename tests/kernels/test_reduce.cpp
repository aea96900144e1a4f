// Reductions against direct loops in long double: whole arrays, per channel, per
// (n, group), per position; float32 inputs accumulate in double.
#include <catch2/catch.hpp>

#include "kernels/reduce.hpp"
#include "tests/kernels/op_test_util.hpp"

using namespace tessera;
using namespace tessera::kernels;
using namespace tessera::test_ops;

TEST_CASE("whole-array sum, mean and sum of squares", "[kernels][reduce]") {
  std::mt19937 rng(51);
  for (Index n : {0, 1, 7, 1000, 100003}) {
    const std::vector<double> x = random_vector(n, rng, -2.0, 3.0);
    long double s = 0, q = 0;
    for (double v : x) s += v, q += static_cast<long double>(v) * v;
    const double tol = 1e-12 * (1 + static_cast<double>(n));
    REQUIRE(std::abs(reduce_sum(Device::host(), DType::f64, n, x.data()) -
                     static_cast<double>(s)) <= tol);
    REQUIRE(std::abs(reduce_sum_squares(Device::host(), DType::f64, n, x.data()) -
                     static_cast<double>(q)) <= tol);
    if (n > 0)
      REQUIRE(std::abs(reduce_mean(Device::host(), DType::f64, n, x.data()) -
                       static_cast<double>(s / n)) <= 1e-13);
    else
      REQUIRE_THROWS_AS(reduce_mean(Device::host(), DType::f64, n, x.data()), Error);
    // float32 data, double accumulation: equals the double sum of the rounded values.
    const std::vector<float> xf = as<float>(x);
    long double sf = 0;
    for (float v : xf) sf += v;
    REQUIRE(std::abs(reduce_sum(Device::host(), DType::f32, n, xf.data()) -
                     static_cast<double>(sf)) <= tol);
  }
}

TEST_CASE("per-group sums for every statistics layout", "[kernels][reduce]") {
  std::mt19937 rng(52);
  for (int trial = 0; trial < 60; ++trial) {
    const Index n = rand_in(rng, 1, 3), groups = rand_in(rng, 1, 3),
                c = groups * rand_in(rng, 1, 3), inner = rand_in(rng, 1, 30);
    const std::vector<double> x = random_vector(n * c * inner, rng);
    for (StatKind kind : {StatKind::PerGroup, StatKind::PerChannel, StatKind::PerPosition}) {
      const StatLayout l{kind, n, c, inner, groups};
      // Reference: walk (n, c, s), add each cell into the group its kind names.
      std::vector<double> s_ref(l.count(), 0.0), q_ref(l.count(), 0.0);
      for (Index i = 0; i < n; ++i)
        for (Index j = 0; j < c; ++j)
          for (Index k = 0; k < inner; ++k) {
            const Index g = kind == StatKind::PerGroup     ? i * groups + j / (c / groups)
                            : kind == StatKind::PerChannel ? j
                                                           : i * inner + k;
            const double v = x[(i * c + j) * inner + k];
            s_ref[g] += v;
            q_ref[g] += v * v;
          }
      std::vector<double> s(l.count(), 9.0), q(l.count(), 9.0);
      stat_sums(Device::host(), l, DType::f64, x.data(), s.data(), q.data());
      REQUIRE(max_abs_diff(s, s_ref) <= 1e-12);
      REQUIRE(max_abs_diff(q, q_ref) <= 1e-12);
      const std::vector<float> xf = as<float>(x);
      stat_sums(Device::host(), l, DType::f32, xf.data(), s.data(), nullptr);
      REQUIRE(max_abs_diff(s, s_ref) <= 1e-5);
      if (kind == StatKind::PerChannel) {
        channel_sums(Device::host(), DType::f64, n, c, inner, x.data(), s.data(), q.data());
        REQUIRE(max_abs_diff(s, s_ref) <= 1e-12);
        REQUIRE(max_abs_diff(q, q_ref) <= 1e-12);
      }
      if (kind == StatKind::PerGroup) {
        group_sums(Device::host(), DType::f64, n, c, groups, inner, x.data(), s.data(), q.data());
        REQUIRE(max_abs_diff(s, s_ref) <= 1e-12);
        REQUIRE(max_abs_diff(q, q_ref) <= 1e-12);
      }
    }
  }
  std::vector<double> x(12), s(4);
  REQUIRE_THROWS_AS(group_sums(Device::host(), DType::f64, 1, 3, 2, 4, x.data(), s.data(), nullptr),
                    Error);
}

TEST_CASE("per-group sums of groups larger than one reduction chunk", "[kernels][reduce]") {
  std::mt19937 rng(53);
  const Index n = 2, c = 4, inner = 20011;  // per channel: 40022 cells, three chunks
  const std::vector<double> x = random_vector(n * c * inner, rng);
  for (StatKind kind : {StatKind::PerGroup, StatKind::PerChannel}) {
    const StatLayout l{kind, n, c, inner, 2};
    std::vector<long double> s_ref(l.count(), 0.0L);
    for (Index e = 0; e < l.elements(); ++e) {
      const Index i = e / (c * inner), j = (e / inner) % c;
      s_ref[kind == StatKind::PerGroup ? i * 2 + j / 2 : j] += x[e];
    }
    std::vector<double> s(l.count()), q(l.count());
    stat_sums(Device::host(), l, DType::f64, x.data(), s.data(), q.data());
    for (Index g = 0; g < l.count(); ++g)
      REQUIRE(std::abs(s[g] - static_cast<double>(s_ref[g])) <= 1e-10);
  }
}
