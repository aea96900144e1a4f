// tile_sgemm against a float64 triple loop: every transpose pair, row strides wider than
// the matrices, alpha and beta 0 / 1, an empty inner dimension, odd shapes, a shape cache
// that overflows (the oldest plans evicted and planned again), calls from inside an OpenMP
// team (each thread its own plans) giving the bits of a lone call, and the refusals.
#include <catch2/catch.hpp>
#include <omp.h>

#include <cmath>
#include <random>
#include <vector>

#include "decomp/error.hpp"
#include "kernels/cpu/tile_sgemm.hpp"
#include "tests/support/random_values.hpp"

using namespace tessera;
using tessera::kernels::cpu::tile_sgemm;

namespace {

struct Case {
  char ta, tb;
  Index m, n, k, lda, ldb, ldc;
  float alpha, beta;
};

// op(A) element (i, p) of a row-major A with row stride lda.
float at(const std::vector<float>& x, char t, Index ld, Index i, Index p) {
  return t == 'N' ? x[i * ld + p] : x[p * ld + i];
}

// The largest |tile_sgemm - reference| over C, relative to the largest |reference|, and
// whether the entries outside the m x n block (the stride's padding) kept their values.
struct Outcome {
  double error = 0;
  bool padding_kept = true;
};

Outcome check(const Case& c) {
  const Index arows = c.ta == 'N' ? c.m : c.k, brows = c.tb == 'N' ? c.k : c.n;
  const auto a = test::random_values<float>(static_cast<std::size_t>(arows * c.lda), 1);
  const auto b = test::random_values<float>(static_cast<std::size_t>(brows * c.ldb), 2);
  const auto c0 = test::random_values<float>(static_cast<std::size_t>(c.m * c.ldc), 3);
  std::vector<float> got = c0;
  tile_sgemm(c.ta, c.tb, c.m, c.n, c.k, c.alpha, a.data(), c.lda, b.data(), c.ldb, c.beta,
             got.data(), c.ldc);
  Outcome o;
  double scale = 0;
  for (Index i = 0; i < c.m; ++i)
    for (Index j = 0; j < c.ldc; ++j) {
      const std::size_t ij = static_cast<std::size_t>(i * c.ldc + j);
      if (j >= c.n) {
        o.padding_kept = o.padding_kept && got[ij] == c0[ij];
        continue;
      }
      double ref = c.beta * static_cast<double>(c0[ij]);
      double prod = 0;
      for (Index p = 0; p < c.k; ++p)
        prod += static_cast<double>(at(a, c.ta, c.lda, i, p)) * at(b, c.tb, c.ldb, p, j);
      ref += c.alpha * prod;
      o.error = std::max(o.error, std::abs(got[ij] - ref));
      scale = std::max(scale, std::abs(ref));
    }
  o.error /= std::max(scale, 1e-30);
  return o;
}

}  // namespace

TEST_CASE("tile_sgemm equals the float64 product, every transpose, strides, alpha and beta") {
  for (char ta : {'N', 'T'})
    for (char tb : {'N', 'T'})
      for (float beta : {0.0f, 1.0f})
        for (float alpha : {1.0f, -0.37f}) {
          // Odd shapes, row strides 3 wider than needed.
          const Index m = 37, n = 29, k = 65;
          const Case c{ta,    tb,    m,   n, k, (ta == 'N' ? k : m) + 3, (tb == 'N' ? n : k) + 3,
                       n + 3, alpha, beta};
          INFO(ta << tb << " alpha " << alpha << " beta " << beta);
          const Outcome o = check(c);
          CHECK(o.error < 1e-6);
          CHECK(o.padding_kept);
        }
}

TEST_CASE("tile_sgemm at attention's tile shapes and with an empty inner dimension") {
  // The float32 attention's products: scores, P V and dQ, dK and dV.
  for (const Case& c : {Case{'N', 'T', 128, 512, 64, 64, 64, 512, 0.18f, 0.0f},
                        Case{'N', 'N', 128, 64, 512, 512, 64, 64, 1.0f, 1.0f},
                        Case{'T', 'N', 512, 64, 128, 512, 64, 64, 0.125f, 1.0f},
                        Case{'N', 'N', 1, 1, 1, 1, 1, 1, 2.0f, 0.0f}}) {
    INFO(c.ta << c.tb << " " << c.m << " x " << c.n << " x " << c.k);
    CHECK(check(c).error < 1e-6);
  }
  // k = 0: C = beta C.
  std::vector<float> cm = {1, 2, 3, 4};
  tile_sgemm('N', 'N', 2, 2, 0, 1.0f, nullptr, 1, nullptr, 2, 1.0f, cm.data(), 2);
  CHECK(cm == std::vector<float>{1, 2, 3, 4});
  tile_sgemm('N', 'N', 2, 2, 0, 1.0f, nullptr, 1, nullptr, 2, 0.0f, cm.data(), 2);
  CHECK(cm == std::vector<float>{0, 0, 0, 0});
}

TEST_CASE("tile_sgemm plans past its cache bound and gives the same bits inside a team") {
  // 60 distinct shapes twice over: more than the plans a thread keeps, so early shapes are
  // planned again on the second pass and must give what they gave on the first.
  std::vector<std::vector<float>> first;
  const auto a = test::random_values<float>(64 * 64, 4), b = test::random_values<float>(64 * 64, 5);
  for (int pass = 0; pass < 2; ++pass)
    for (Index m = 1; m <= 60; ++m) {
      std::vector<float> c(static_cast<std::size_t>(m * 64));
      tile_sgemm('N', 'T', m, 64, 64, 1.0f, a.data(), 64, b.data(), 64, 0.0f, c.data(), 64);
      if (pass == 0)
        first.push_back(c);
      else
        CHECK(c == first[static_cast<std::size_t>(m - 1)]);
    }
  // The same products from every thread of a team of 3: each thread plans its own, and the
  // bits are a lone call's.
  std::vector<int> same(3, 1);
#pragma omp parallel num_threads(3)
  {
    const int t = omp_get_thread_num();
    for (Index m = 1; m <= 60; m += 7) {
      std::vector<float> c(static_cast<std::size_t>(m * 64));
      tile_sgemm('N', 'T', m, 64, 64, 1.0f, a.data(), 64, b.data(), 64, 0.0f, c.data(), 64);
      if (c != first[static_cast<std::size_t>(m - 1)]) same[static_cast<std::size_t>(t)] = 0;
    }
  }
  CHECK(same == std::vector<int>{1, 1, 1});
}

TEST_CASE("tile_sgemm refuses what it does not compute") {
  std::vector<float> x(4, 1.0f), c(4);
  CHECK_THROWS_WITH(
      tile_sgemm('C', 'N', 2, 2, 2, 1.0f, x.data(), 2, x.data(), 2, 0.0f, c.data(), 2),
      Catch::Contains("'N' or 'T'"));
  CHECK_THROWS_WITH(
      tile_sgemm('N', 'N', 2, 2, 2, 1.0f, x.data(), 2, x.data(), 2, 0.5f, c.data(), 2),
      Catch::Contains("beta is 0 or 1"));
}
