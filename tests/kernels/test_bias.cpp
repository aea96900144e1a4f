// Channel bias against direct loops; the backward is the adjoint of the forward.
#include <catch2/catch.hpp>

#include "kernels/bias.hpp"
#include "tests/kernels/op_test_util.hpp"

using namespace tessera;
using namespace tessera::kernels;
using namespace tessera::test_ops;

TEST_CASE("channel bias forward and backward equal direct loops", "[kernels][bias]") {
  std::mt19937 rng(41);
  for (int trial = 0; trial < 50; ++trial) {
    const Index n = rand_in(rng, 1, 3), c = rand_in(rng, 1, 5), inner = rand_in(rng, 1, 40);
    const std::vector<double> y0 = random_vector(n * c * inner, rng), b = random_vector(c, rng),
                              dy = random_vector(n * c * inner, rng);
    std::vector<double> y_ref = y0, db_ref(c, 0.0);
    for (Index i = 0; i < n; ++i)
      for (Index j = 0; j < c; ++j)
        for (Index s = 0; s < inner; ++s) {
          y_ref[(i * c + j) * inner + s] += b[j];
          db_ref[j] += dy[(i * c + j) * inner + s];
        }
    std::vector<double> y = y0, db(c, 42.0);
    bias_add(Device::host(), DType::f64, n, c, inner, y.data(), b.data());
    bias_backward(Device::host(), DType::f64, n, c, inner, dy.data(), db.data());
    REQUIRE(max_abs_diff(y, y_ref) <= 1e-15);
    REQUIRE(max_abs_diff(db, db_ref) <= 1e-12);
    // Adjoint: <B b, dy> == <b, B* dy> for the linear map b -> (bias_add onto zeros).
    std::vector<double> z(y0.size(), 0.0);
    bias_add(Device::host(), DType::f64, n, c, inner, z.data(), b.data());
    REQUIRE(std::abs(dot(z, dy) - dot(b, db)) <= 1e-12);

    std::vector<float> yf = as<float>(y0), dbf(c);
    const std::vector<float> bf = as<float>(b), dyf = as<float>(dy);
    bias_add(Device::host(), DType::f32, n, c, inner, yf.data(), bf.data());
    bias_backward(Device::host(), DType::f32, n, c, inner, dyf.data(), dbf.data());
    REQUIRE(max_abs_diff(to_double(yf), y_ref) <= 1e-6);
    REQUIRE(max_abs_diff(to_double(dbf), db_ref) <= 1e-5);
  }
}
