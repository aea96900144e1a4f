// Normalization (GroupNorm, BatchNorm, channel LayerNorm) against a direct float64
// reference; the whole chain (stat sums -> mean/rstd -> forward; backward sums -> dx,
// dgamma, dbeta) against finite differences; a spatially split tensor (two "ranks" whose
// local sums are added) equals the unsplit one.
#include <catch2/catch.hpp>
#include <cmath>

#include "kernels/norm.hpp"
#include "kernels/reduce.hpp"
#include "tests/kernels/op_test_util.hpp"

using namespace tessera;
using namespace tessera::kernels;
using namespace tessera::test_ops;

namespace {

constexpr double kEps = 1e-5;

struct Shape {
  StatKind kind;
  Index n, c, inner, groups;
  StatLayout layout() const { return {kind, n, c, inner, groups}; }
};

// Reference: the members of each group listed explicitly, two-pass mean and variance.
std::vector<double> ref_forward(const Shape& s, const std::vector<double>& x,
                                const std::vector<double>& gamma, const std::vector<double>& beta) {
  const Index ngroups = s.kind == StatKind::PerGroup     ? s.n * s.groups
                        : s.kind == StatKind::PerChannel ? s.c
                                                         : s.n * s.inner;
  std::vector<std::vector<Index>> members(ngroups);
  for (Index i = 0; i < s.n; ++i)
    for (Index j = 0; j < s.c; ++j)
      for (Index k = 0; k < s.inner; ++k) {
        const Index g = s.kind == StatKind::PerGroup     ? i * s.groups + j * s.groups / s.c
                        : s.kind == StatKind::PerChannel ? j
                                                         : i * s.inner + k;
        members[g].push_back((i * s.c + j) * s.inner + k);
      }
  std::vector<double> y(x.size());
  for (const auto& m : members) {
    double mean = 0, var = 0;
    for (Index e : m) mean += x[e];
    mean /= static_cast<double>(m.size());
    for (Index e : m) var += (x[e] - mean) * (x[e] - mean);
    var /= static_cast<double>(m.size());
    for (Index e : m) {
      const Index ch = (e / s.inner) % s.c;
      y[e] = (x[e] - mean) / std::sqrt(var + kEps) * gamma[ch] + beta[ch];
    }
  }
  return y;
}

// Global statistics from (already summed) sums, as a layer computes them.
void stats_from_sums(const std::vector<double>& sum, const std::vector<double>& sq, double M,
                     std::vector<double>& mean, std::vector<double>& rstd) {
  mean.resize(sum.size());
  rstd.resize(sum.size());
  for (std::size_t g = 0; g < sum.size(); ++g) {
    mean[g] = sum[g] / M;
    rstd[g] = 1.0 / std::sqrt(std::max(sq[g] / M - mean[g] * mean[g], 0.0) + kEps);
  }
}

double group_size(const Shape& s) {  // global M
  const StatLayout l = s.layout();
  return static_cast<double>(l.size());
}

template <class T>
struct Chain {
  std::vector<double> y, dx, dgamma, dbeta;
};

// The kernels' chain on one tensor: forward and backward.
template <class T>
Chain<T> run_chain(const Shape& s, const std::vector<double>& x, const std::vector<double>& gamma,
                   const std::vector<double>& beta, const std::vector<double>& dy) {
  const StatLayout l = s.layout();
  const DType type = std::is_same_v<T, double> ? DType::f64 : DType::f32;
  const std::vector<T> xt = as<T>(x), gt = as<T>(gamma), bt = as<T>(beta), dyt = as<T>(dy);
  std::vector<double> sum(l.count()), sq(l.count()), mean, rstd;
  stat_sums(Device::host(), l, type, xt.data(), sum.data(), sq.data());
  const double M = group_size(s);
  stats_from_sums(sum, sq, M, mean, rstd);
  NormArgs a{l, type, mean.data(), rstd.data(), gt.data(), bt.data()};
  std::vector<T> y(x.size()), dx(x.size());
  norm_forward(Device::host(), a, xt.data(), y.data());
  std::vector<double> s1(l.count()), s2(l.count());
  norm_backward_sums(Device::host(), a, xt.data(), dyt.data(), s1.data(), s2.data());
  norm_backward_dx(Device::host(), a, xt.data(), dyt.data(), s1.data(), s2.data(), M, dx.data());
  Chain<T> r;
  r.dgamma.resize(s.c);
  r.dbeta.resize(s.c);
  norm_param_grads(Device::host(), a, xt.data(), dyt.data(), r.dgamma.data(), r.dbeta.data());
  r.y = to_double(y);
  r.dx = to_double(dx);
  return r;
}

Shape random_shape(std::mt19937& rng, StatKind kind) {
  Shape s{kind, rand_in(rng, 1, 3), 0, rand_in(rng, 2, 12), rand_in(rng, 1, 3)};
  s.c = s.groups * rand_in(rng, 1, 3);
  if (kind != StatKind::PerGroup) s.groups = 1;
  if (kind == StatKind::PerPosition) s.c = std::max<Index>(s.c, 2);
  return s;
}

const StatKind kKinds[] = {StatKind::PerGroup, StatKind::PerChannel, StatKind::PerPosition};

}  // namespace

TEST_CASE("norm forward equals the float64 reference for every layout", "[kernels][norm]") {
  std::mt19937 rng(61);
  for (int trial = 0; trial < 40; ++trial)
    for (StatKind kind : kKinds) {
      const Shape s = random_shape(rng, kind);
      const std::vector<double> x = random_vector(s.n * s.c * s.inner, rng, -2.0, 3.0),
                                gamma = random_vector(s.c, rng), beta = random_vector(s.c, rng),
                                dy = random_vector(x.size(), rng);
      const std::vector<double> ref = ref_forward(s, x, gamma, beta);
      REQUIRE(max_abs_diff(run_chain<double>(s, x, gamma, beta, dy).y, ref) <= 1e-10);
      REQUIRE(max_abs_diff(run_chain<float>(s, x, gamma, beta, dy).y, ref) <= 2e-5);
      // No affine parameters: gamma = 1, beta = 0.
      const StatLayout l = s.layout();
      std::vector<double> sum(l.count()), sq(l.count()), mean, rstd, y(x.size());
      stat_sums(Device::host(), l, DType::f64, x.data(), sum.data(), sq.data());
      stats_from_sums(sum, sq, group_size(s), mean, rstd);
      norm_forward(Device::host(), {l, DType::f64, mean.data(), rstd.data()}, x.data(), y.data());
      REQUIRE(max_abs_diff(y, ref_forward(s, x, std::vector<double>(s.c, 1.0),
                                          std::vector<double>(s.c, 0.0))) <= 1e-10);
    }
}

TEST_CASE("norm backward chain matches finite differences (float64)", "[kernels][norm]") {
  std::mt19937 rng(62);
  for (int trial = 0; trial < 8; ++trial)
    for (StatKind kind : kKinds) {
      const Shape s = random_shape(rng, kind);
      const std::vector<double> x = random_vector(s.n * s.c * s.inner, rng, -2.0, 3.0),
                                gamma = random_vector(s.c, rng), beta = random_vector(s.c, rng),
                                w = random_vector(x.size(), rng);
      auto loss = [&](const std::vector<double>& xx, const std::vector<double>& gg,
                      const std::vector<double>& bb) { return dot(w, ref_forward(s, xx, gg, bb)); };
      const Chain<double> r = run_chain<double>(s, x, gamma, beta, w);
      const double h = 1e-6;
      auto fd = [&](std::vector<double> v, std::size_t i, int which) {
        std::vector<double> p = v, m = v;
        p[i] += h;
        m[i] -= h;
        if (which == 0) return (loss(p, gamma, beta) - loss(m, gamma, beta)) / (2 * h);
        if (which == 1) return (loss(x, p, beta) - loss(x, m, beta)) / (2 * h);
        return (loss(x, gamma, p) - loss(x, gamma, m)) / (2 * h);
      };
      double ex = 0, eg = 0, eb = 0;
      for (std::size_t i = 0; i < x.size(); ++i) ex = std::max(ex, std::abs(fd(x, i, 0) - r.dx[i]));
      for (std::size_t i = 0; i < gamma.size(); ++i) {
        eg = std::max(eg, std::abs(fd(gamma, i, 1) - r.dgamma[i]));
        eb = std::max(eb, std::abs(fd(beta, i, 2) - r.dbeta[i]));
      }
      INFO("kind " << static_cast<int>(kind) << " n " << s.n << " c " << s.c << " inner " << s.inner
                   << " groups " << s.groups);
      REQUIRE(ex < 2e-7);
      REQUIRE(eg < 2e-7);
      REQUIRE(eb < 2e-7);
    }
}

TEST_CASE("norm on a spatially split tensor with summed local sums equals the whole",
          "[kernels][norm]") {
  std::mt19937 rng(63);
  for (int trial = 0; trial < 30; ++trial)
    for (StatKind kind : kKinds) {
      const Shape s = random_shape(rng, kind);
      const std::vector<double> x = random_vector(s.n * s.c * s.inner, rng, -2.0, 3.0),
                                gamma = random_vector(s.c, rng), beta = random_vector(s.c, rng),
                                dy = random_vector(x.size(), rng);
      const Chain<double> whole = run_chain<double>(s, x, gamma, beta, dy);
      // Two pieces along the spatial dim: [0, cut) and [cut, inner).
      const Index cut = rand_in(rng, 1, s.inner - 1);
      Shape part[2] = {s, s};
      part[0].inner = cut;
      part[1].inner = s.inner - cut;
      std::vector<double> px[2], pdy[2];
      for (Index e = 0; e < static_cast<Index>(x.size()); ++e) {
        const Index k = e % s.inner, p = k < cut ? 0 : 1;
        px[p].push_back(x[e]);
        pdy[p].push_back(dy[e]);
      }
      const bool local = kind == StatKind::PerPosition;  // statistics over channels only
      std::vector<double> sum[2], sq[2], mean[2], rstd[2], s1[2], s2[2], dg[2], db[2], y[2], dx[2];
      for (int p = 0; p < 2; ++p) {
        const StatLayout l = part[p].layout();
        sum[p].resize(l.count());
        sq[p].resize(l.count());
        stat_sums(Device::host(), l, DType::f64, px[p].data(), sum[p].data(), sq[p].data());
      }
      if (!local)
        for (std::size_t g = 0; g < sum[0].size(); ++g) {  // the all-reduce
          sum[0][g] = sum[1][g] = sum[0][g] + sum[1][g];
          sq[0][g] = sq[1][g] = sq[0][g] + sq[1][g];
        }
      const double M = group_size(s);
      for (int p = 0; p < 2; ++p) {
        const StatLayout l = part[p].layout();
        stats_from_sums(sum[p], sq[p], M, mean[p], rstd[p]);
        const NormArgs a{l, DType::f64, mean[p].data(), rstd[p].data(), gamma.data(), beta.data()};
        y[p].resize(px[p].size());
        norm_forward(Device::host(), a, px[p].data(), y[p].data());
        s1[p].resize(l.count());
        s2[p].resize(l.count());
        norm_backward_sums(Device::host(), a, px[p].data(), pdy[p].data(), s1[p].data(),
                           s2[p].data());
        dg[p].resize(s.c);
        db[p].resize(s.c);
        norm_param_grads(Device::host(), a, px[p].data(), pdy[p].data(), dg[p].data(),
                         db[p].data());
      }
      if (!local)
        for (std::size_t g = 0; g < s1[0].size(); ++g) {
          s1[0][g] = s1[1][g] = s1[0][g] + s1[1][g];
          s2[0][g] = s2[1][g] = s2[0][g] + s2[1][g];
        }
      for (int p = 0; p < 2; ++p) {
        const NormArgs a{part[p].layout(), DType::f64,   mean[p].data(),
                         rstd[p].data(),   gamma.data(), beta.data()};
        dx[p].resize(px[p].size());
        norm_backward_dx(Device::host(), a, px[p].data(), pdy[p].data(), s1[p].data(), s2[p].data(),
                         M, dx[p].data());
      }
      std::vector<double> y_join, dx_join;
      Index at[2] = {0, 0};
      for (Index e = 0; e < static_cast<Index>(x.size()); ++e) {
        const int p = e % s.inner < cut ? 0 : 1;
        y_join.push_back(y[p][at[p]]);
        dx_join.push_back(dx[p][at[p]++]);
      }
      REQUIRE(max_abs_diff(y_join, whole.y) <= 1e-12);
      REQUIRE(max_abs_diff(dx_join, whole.dx) <= 1e-12);
      for (Index ch = 0; ch < s.c; ++ch) {
        REQUIRE(std::abs(dg[0][ch] + dg[1][ch] - whole.dgamma[ch]) <= 1e-12);
        REQUIRE(std::abs(db[0][ch] + db[1][ch] - whole.dbeta[ch]) <= 1e-12);
      }
    }
}

TEST_CASE("norm float32 chain agrees with float64", "[kernels][norm]") {
  std::mt19937 rng(64);
  auto rounded = [](const std::vector<double>& v) { return to_double(as<float>(v)); };
  for (int trial = 0; trial < 20; ++trial)
    for (StatKind kind : kKinds) {
      const Shape s = random_shape(rng, kind);
      const std::vector<double> x = rounded(random_vector(s.n * s.c * s.inner, rng, -2.0, 3.0)),
                                gamma = rounded(random_vector(s.c, rng)),
                                beta = rounded(random_vector(s.c, rng)),
                                dy = rounded(random_vector(x.size(), rng));
      const Chain<double> d = run_chain<double>(s, x, gamma, beta, dy);
      const Chain<float> f = run_chain<float>(s, x, gamma, beta, dy);
      REQUIRE(max_abs_diff(f.y, d.y) <= 1e-5 * (1 + max_abs(d.y)));
      REQUIRE(max_abs_diff(f.dx, d.dx) <= 1e-5 * (1 + max_abs(d.dx)));
      // Parameter gradients are accumulated in double from float data: close to 1e-5.
      REQUIRE(max_abs_diff(f.dgamma, d.dgamma) <= 1e-5 * (1 + max_abs(d.dgamma)));
      REQUIRE(max_abs_diff(f.dbeta, d.dbeta) <= 1e-12 * (1 + max_abs(d.dbeta)));
    }
}

TEST_CASE("norm with groups larger than one reduction chunk", "[kernels][norm]") {
  std::mt19937 rng(65);
  for (StatKind kind : {StatKind::PerGroup, StatKind::PerChannel}) {
    const Shape s{kind, 2, 4, 9001, 2};  // 18002 cells per group: two chunks
    const std::vector<double> x = random_vector(s.n * s.c * s.inner, rng, -2.0, 3.0),
                              gamma = random_vector(s.c, rng), beta = random_vector(s.c, rng),
                              dy = random_vector(x.size(), rng);
    const Chain<double> r = run_chain<double>(s, x, gamma, beta, dy);
    REQUIRE(max_abs_diff(r.y, ref_forward(s, x, gamma, beta)) <= 1e-10);
    // Direct loops: two-pass statistics per group, then the closed-form gradients.
    const StatLayout l = s.layout();
    const Index G = l.count();
    auto group = [&](Index e) {
      const Index i = e / (s.c * s.inner), j = (e / s.inner) % s.c;
      return kind == StatKind::PerGroup ? i * 2 + j / 2 : j;
    };
    std::vector<double> mean(G, 0.0), var(G, 0.0), m1(G, 0.0), m2(G, 0.0);
    const double M = static_cast<double>(l.size());
    for (Index e = 0; e < l.elements(); ++e) mean[group(e)] += x[e] / M;
    for (Index e = 0; e < l.elements(); ++e)
      var[group(e)] += (x[e] - mean[group(e)]) * (x[e] - mean[group(e)]) / M;
    auto xhat = [&](Index e) { return (x[e] - mean[group(e)]) / std::sqrt(var[group(e)] + kEps); };
    for (Index e = 0; e < l.elements(); ++e) {
      const double dyg = dy[e] * gamma[(e / s.inner) % s.c];
      m1[group(e)] += dyg / M;
      m2[group(e)] += dyg * xhat(e) / M;
    }
    std::vector<double> dx(x.size()), dgamma(s.c, 0.0), dbeta(s.c, 0.0);
    for (Index e = 0; e < l.elements(); ++e) {
      const Index g = group(e), ch = (e / s.inner) % s.c;
      dx[e] = (dy[e] * gamma[ch] - m1[g] - xhat(e) * m2[g]) / std::sqrt(var[g] + kEps);
      dgamma[ch] += dy[e] * xhat(e);
      dbeta[ch] += dy[e];
    }
    REQUIRE(max_abs_diff(r.dx, dx) <= 1e-9);
    REQUIRE(max_abs_diff(r.dgamma, dgamma) <= 1e-9);
    REQUIRE(max_abs_diff(r.dbeta, dbeta) <= 1e-9);
  }
}

TEST_CASE("the host's cell walk visits a group's cells as element(g, j) lists them",
          "[kernels][norm]") {
  // The host reductions walk cells with StatLayout::next instead of element(g, j); the walk
  // must give the same cells in the same order (so sums keep their bits), with their
  // coordinates, from any starting cell (the reductions' chunks start anywhere).
  for (const Shape& s :
       {Shape{StatKind::PerGroup, 3, 6, 7, 2}, Shape{StatKind::PerGroup, 2, 4, 1, 4},
        Shape{StatKind::PerChannel, 3, 5, 4, 1}, Shape{StatKind::PerChannel, 1, 1, 9, 1},
        Shape{StatKind::PerPosition, 2, 5, 6, 1}}) {
    const StatLayout l = s.layout();
    for (Index g = 0; g < l.count(); ++g)
      for (Index lo : {Index{0}, l.size() / 2, l.size() - 1}) {
        StatLayout::Cell k = l.cell(g, lo);
        for (Index j = lo; j < l.size(); ++j, l.next(k)) {
          const Index e = l.element(g, j);
          REQUIRE(k.e == e);
          REQUIRE(k.ch == l.channel_of(e));
          REQUIRE(k.nn == e / (l.c * l.inner));
          REQUIRE(k.s == e % l.inner);
          REQUIRE(l.group_of(e) == g);
          REQUIRE(l.group_at(k.nn, k.ch, k.s) == g);
        }
      }
  }
}
