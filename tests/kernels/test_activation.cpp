// Activations against float64 reference formulas (written in other forms than the
// kernels: GELU through erfc, SiLU through tanh), derivatives by finite differences.
#include <catch2/catch.hpp>
#include <cmath>

#include "kernels/activation.hpp"
#include "tests/kernels/op_test_util.hpp"

using namespace tessera;
using namespace tessera::kernels;
using namespace tessera::test_ops;

namespace {

double ref_value(Activation a, double x) {
  switch (a) {
    case Activation::ReLU:
      return std::max(x, 0.0);
    case Activation::GELU:
      return 0.5 * x * std::erfc(-x / std::sqrt(2.0));
    case Activation::SiLU:  // sigma(x) = (1 + tanh(x/2)) / 2
      return x * 0.5 * (1.0 + std::tanh(0.5 * x));
    case Activation::Tanh:
      return std::tanh(x);
  }
  return 0;
}

const Activation kAll[] = {Activation::ReLU, Activation::GELU, Activation::SiLU, Activation::Tanh};

std::vector<double> inputs(std::mt19937& rng) {
  std::vector<double> x = random_vector(997, rng, -6.0, 6.0);
  for (double v : {0.0, -0.0, 1e-8, -1e-8, 30.0, -30.0, 80.0, -80.0, 100.0, -100.0}) x.push_back(v);
  return x;
}

}  // namespace

TEST_CASE("activations equal the float64 reference", "[kernels][activation]") {
  std::mt19937 rng(31);
  const std::vector<double> x = inputs(rng);
  const Index n = static_cast<Index>(x.size());
  for (Activation a : kAll) {
    INFO(name_of(a));
    std::vector<double> ref(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) ref[i] = ref_value(a, x[i]);
    std::vector<double> y(x.size());
    activation_forward(Device::host(), a, DType::f64, n, x.data(), y.data());
    for (std::size_t i = 0; i < x.size(); ++i)
      REQUIRE(std::abs(y[i] - ref[i]) <= 1e-14 * (1 + std::abs(ref[i])));
    const std::vector<float> xf = as<float>(x);
    std::vector<float> yf(x.size());
    activation_forward(Device::host(), a, DType::f32, n, xf.data(), yf.data());
    for (std::size_t i = 0; i < x.size(); ++i) {
      const double r = ref_value(a, static_cast<double>(xf[i]));
      REQUIRE(std::isfinite(yf[i]));
      REQUIRE(std::abs(yf[i] - r) <= 1e-6 * (1 + std::abs(r)));
    }
    // In place: y aliases x.
    std::vector<double> z = x;
    activation_forward(Device::host(), a, DType::f64, n, z.data(), z.data());
    REQUIRE(z == y);
  }
}

TEST_CASE("activation backward matches finite differences (float64) and float32",
          "[kernels][activation]") {
  std::mt19937 rng(32);
  std::vector<double> x = random_vector(500, rng, -6.0, 6.0);
  for (auto& v : x)
    if (std::abs(v) < 1e-3) v = 0.5;  // ReLU's kink
  const Index n = static_cast<Index>(x.size());
  const std::vector<double> dy = random_vector(x.size(), rng);
  for (Activation a : kAll) {
    INFO(name_of(a));
    std::vector<double> dx(x.size());
    activation_backward(Device::host(), a, DType::f64, n, x.data(), dy.data(), dx.data());
    const double h = 1e-6;
    for (std::size_t i = 0; i < x.size(); ++i) {
      const double fd = (ref_value(a, x[i] + h) - ref_value(a, x[i] - h)) / (2 * h);
      REQUIRE(std::abs(dx[i] - dy[i] * fd) <= 1e-8);
    }
    const std::vector<float> xf = as<float>(x), dyf = as<float>(dy);
    std::vector<float> dxf(x.size());
    activation_backward(Device::host(), a, DType::f32, n, xf.data(), dyf.data(), dxf.data());
    std::vector<double> dx32(x.size());
    const std::vector<double> xr = to_double(xf), dyr = to_double(dyf);
    activation_backward(Device::host(), a, DType::f64, n, xr.data(), dyr.data(), dx32.data());
    REQUIRE(max_abs_diff(to_double(dxf), dx32) <= 1e-6);
    // dx may alias dy.
    std::vector<double> inplace = dy;
    activation_backward(Device::host(), a, DType::f64, n, x.data(), inplace.data(), inplace.data());
    REQUIRE(inplace == dx);
  }
  // Far tails: derivatives are finite and tend to their limits.
  const std::vector<double> tails{-100.0, 100.0}, ones{1.0, 1.0};
  for (Activation a : kAll) {
    std::vector<double> d(2);
    activation_backward(Device::host(), a, DType::f64, 2, tails.data(), ones.data(), d.data());
    REQUIRE(std::abs(d[0]) < 1e-12);
    REQUIRE(std::abs(d[1] - (a == Activation::Tanh ? 0.0 : 1.0)) < 1e-12);
  }
}

TEST_CASE("an activation cast from an unknown integer is refused, not run as the identity",
          "[kernels][activation]") {
  const auto bad = static_cast<Activation>(99);
  std::vector<double> x{1.0, -2.0}, y(2);
  REQUIRE_THROWS_WITH(activation_forward(Device::host(), bad, DType::f64, 2, x.data(), y.data()),
                      Catch::Contains("unknown kind 99"));
  REQUIRE_THROWS_WITH(
      activation_backward(Device::host(), bad, DType::f64, 2, x.data(), x.data(), y.data()),
      Catch::Contains("unknown kind 99"));
}
