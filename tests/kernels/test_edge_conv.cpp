// The edge convolution kernel against a naive float64 evaluation of its definition, forward
// and backward: y_i = max_j / mean_j act(W e_ij + b) over existing neighbours, the max's
// gradient routed to its first maximal edge, the mean's spread evenly; dW, db summed over
// every edge. Float64 to 1e-12, float32 to 1e-5 (relative); missing neighbours (-1), points
// with none, k = 1, and each activation.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/edge_conv.hpp"

using namespace tessera;
using namespace tessera::kernels;

namespace {

double act(Activation a, double x) {
  switch (a) {
    case Activation::ReLU:
      return x > 0 ? x : 0;
    case Activation::GELU:
      return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
    case Activation::Tanh:
      return std::tanh(x);
    case Activation::SiLU:
      return x / (1 + std::exp(-x));
  }
  return x;
}
double act_grad(Activation a, double x) {
  switch (a) {
    case Activation::ReLU:
      return x > 0 ? 1 : 0;
    case Activation::GELU: {
      const double pdf = std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI);
      return 0.5 * (1 + std::erf(x / std::sqrt(2.0))) + x * pdf;
    }
    case Activation::Tanh:
      return 1 - std::tanh(x) * std::tanh(x);
    case Activation::SiLU: {
      const double sg = 1 / (1 + std::exp(-x));
      return sg * (1 + x * (1 - sg));
    }
  }
  return 1;
}

struct Reference {
  std::vector<double> y, de, dw, db;
};

// The definition, edge by edge, in float64 from the (rounded) inputs.
Reference reference(const EdgeConvShape& s, const std::vector<double>& e,
                    const std::vector<std::int64_t>& ids, const std::vector<double>& w,
                    const std::vector<double>& b, const std::vector<double>& dy) {
  const Index m = s.points, k = s.neighbours, E = s.edge, O = s.out;
  Reference r;
  r.y.assign(static_cast<std::size_t>(m * O), 0.0);
  r.de.assign(static_cast<std::size_t>(m * k * E), 0.0);
  r.dw.assign(static_cast<std::size_t>(O * E), 0.0);
  r.db.assign(static_cast<std::size_t>(O), 0.0);
  std::vector<double> z(static_cast<std::size_t>(m * k * O));
  for (Index i = 0; i < m * k; ++i)
    for (Index o = 0; o < O; ++o) {
      double acc = b[static_cast<std::size_t>(o)];
      for (Index c = 0; c < E; ++c)
        acc += w[static_cast<std::size_t>(o * E + c)] * e[static_cast<std::size_t>(i * E + c)];
      z[static_cast<std::size_t>(i * O + o)] = acc;
    }
  for (Index i = 0; i < m; ++i)
    for (Index o = 0; o < O; ++o) {
      Index count = 0, at = -1;
      double best = 0, sum = 0;
      for (Index j = 0; j < k; ++j) {
        if (ids[static_cast<std::size_t>(i * k + j)] < 0) continue;
        const double h = act(s.activation, z[static_cast<std::size_t>((i * k + j) * O + o)]);
        ++count;
        sum += h;
        if (at < 0 || h > best) best = h, at = j;
      }
      r.y[static_cast<std::size_t>(i * O + o)] = at < 0 ? 0 : s.mean ? sum / double(count) : best;
      // Backward: the gradient of each edge's pre-activation, then the Linear's adjoints.
      for (Index j = 0; j < k; ++j) {
        if (ids[static_cast<std::size_t>(i * k + j)] < 0) continue;
        const double share = s.mean ? 1.0 / double(count) : (j == at ? 1.0 : 0.0);
        const std::size_t zi = static_cast<std::size_t>((i * k + j) * O + o);
        const double dz =
            dy[static_cast<std::size_t>(i * O + o)] * share * act_grad(s.activation, z[zi]);
        r.db[static_cast<std::size_t>(o)] += dz;
        for (Index c = 0; c < E; ++c) {
          r.dw[static_cast<std::size_t>(o * E + c)] +=
              dz * e[static_cast<std::size_t>((i * k + j) * E + c)];
          r.de[static_cast<std::size_t>((i * k + j) * E + c)] +=
              dz * w[static_cast<std::size_t>(o * E + c)];
        }
      }
    }
  return r;
}

template <class A>
double rel_err(const std::vector<A>& got, const std::vector<double>& want) {
  double m = 0, scale = 1e-30;
  for (std::size_t i = 0; i < want.size(); ++i) {
    m = std::max(m, std::fabs(static_cast<double>(got[i]) - want[i]));
    scale = std::max(scale, std::fabs(want[i]));
  }
  return m / scale;
}

template <class T>
void check_case(const EdgeConvShape& s, std::mt19937& rng, double tol) {
  const Index m = s.points, k = s.neighbours, E = s.edge, O = s.out;
  std::uniform_real_distribution<double> u(-1, 1);
  auto draw = [&](Index n) {
    std::vector<T> v(static_cast<std::size_t>(n));
    for (auto& x : v) x = static_cast<T>(u(rng));
    return v;
  };
  const std::vector<T> e = draw(m * k * E), w = draw(O * E), b = draw(O), dy = draw(m * O);
  std::vector<std::int64_t> ids(static_cast<std::size_t>(m * k));
  for (Index i = 0; i < m; ++i)
    for (Index j = 0; j < k; ++j)  // every 5th point has none; others miss some
      ids[static_cast<std::size_t>(i * k + j)] =
          (i % 5 == 4 || (j > 0 && rng() % 4 == 0)) ? -1 : static_cast<std::int64_t>(rng() % 1000);
  auto wide = [](const std::vector<T>& v) { return std::vector<double>(v.begin(), v.end()); };
  const Reference r = reference(s, wide(e), ids, wide(w), wide(b), wide(dy));

  std::vector<T> z(static_cast<std::size_t>(m * k * O)), y(static_cast<std::size_t>(m * O));
  std::vector<std::int64_t> am(y.size());
  const DType t = std::is_same_v<T, double> ? DType::f64 : DType::f32;
  edge_conv_forward(Device::host(), t, s, e.data(), ids.data(), w.data(), b.data(), z.data(),
                    y.data(), am.data());
  CHECK(rel_err(y, r.y) < tol);
  for (Index i = 0; i < m; ++i)  // a point without neighbours chose none
    if (i % 5 == 4)
      for (Index o = 0; o < O; ++o) CHECK(am[static_cast<std::size_t>(i * O + o)] == -1);

  std::vector<T> de(static_cast<std::size_t>(m * k * E), T(7));  // overwritten
  std::vector<double> dw(static_cast<std::size_t>(O * E), 0.5), db(static_cast<std::size_t>(O), -1);
  edge_conv_backward(Device::host(), t, s, e.data(), ids.data(), w.data(), z.data(), am.data(),
                     dy.data(), de.data(), dw.data(), db.data());
  for (auto& v : dw) v -= 0.5;  // added to, not overwritten
  for (auto& v : db) v += 1;
  CHECK(rel_err(de, r.de) < tol);
  CHECK(rel_err(dw, r.dw) < tol);
  CHECK(rel_err(db, r.db) < tol);
}

}  // namespace

TEST_CASE("edge convolution equals its definition, forward and backward", "[edge_conv]") {
  std::mt19937 rng(5);
  for (bool mean : {false, true})
    for (Activation a : {Activation::GELU, Activation::ReLU, Activation::SiLU, Activation::Tanh})
      for (Index k : {1, 4, 9}) {
        const EdgeConvShape s{23, k, 5 + 3, 6, mean, a};
        INFO("mean " << mean << " activation " << name_of(a) << " k " << k);
        check_case<double>(s, rng, 1e-12);
        check_case<float>(s, rng, 1e-5);
      }
}

TEST_CASE("edge convolution of no points does nothing", "[edge_conv]") {
  const EdgeConvShape s{0, 4, 6, 3, false, Activation::GELU};
  std::vector<double> w(18, 1), b(3, 0), dw(18, 2), db(3, 2);
  edge_conv_forward(Device::host(), DType::f64, s, nullptr, nullptr, w.data(), b.data(), nullptr,
                    nullptr, nullptr);
  edge_conv_backward(Device::host(), DType::f64, s, nullptr, nullptr, w.data(), nullptr, nullptr,
                     nullptr, nullptr, dw.data(), db.data());
  CHECK(dw == std::vector<double>(18, 2));
  CHECK(db == std::vector<double>(3, 2));
}
