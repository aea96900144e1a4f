// The host neighbourhood attention kernel against a naive float64 reference written here from
// NATTEN's definition (each query's window by its per-dim start, a dense softmax over the
// window): output, LSE and every gradient (q, and k and v added into the frame), on 1-D, 2-D
// and 3-D grids with odd and even kernels and dilation, a block of queries inside a larger
// frame, float64 and float32; and the kernel cut into bands of one query row each equal to its
// default bands.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/neighborhood_attention.hpp"

using namespace tessera;
using namespace tessera::kernels;

namespace {

struct Case {
  int nd;
  std::vector<Index> extent, kernel, dilation, q_lo, q_shape, f_lo, f_shape;
  Index batch = 1, heads = 2, dim = 3;
};

struct Result {
  std::vector<double> out, lse, dq, dkv;
};

Index cells_of(const std::vector<Index>& s) {
  Index n = 1;
  for (Index v : s) n *= v;
  return n;
}

// Row-major index of `idx` in a box of `shape`.
Index flat(const std::vector<Index>& idx, const std::vector<Index>& shape) {
  Index f = 0;
  for (std::size_t i = 0; i < shape.size(); ++i) f = f * shape[i] + idx[i];
  return f;
}

// The frame cells of query cell qc's window, from the definition.
std::vector<Index> window_of(const Case& c, Index qc) {
  std::vector<Index> idx(static_cast<std::size_t>(c.nd));
  for (int i = c.nd - 1; i >= 0; --i) {
    const auto u = static_cast<std::size_t>(i);
    idx[u] = qc % c.q_shape[u];
    qc /= c.q_shape[u];
  }
  std::vector<Index> cells = {0};
  std::vector<std::vector<Index>> per_dim(static_cast<std::size_t>(c.nd));
  for (int i = 0; i < c.nd; ++i) {
    const auto u = static_cast<std::size_t>(i);
    const Index start =
        neighborhood_start(c.q_lo[u] + idx[u], c.extent[u], c.kernel[u], c.dilation[u]);
    for (Index t = 0; t < c.kernel[u]; ++t)
      per_dim[u].push_back(start + t * c.dilation[u] - c.f_lo[u]);
  }
  std::vector<Index> out;
  std::vector<Index> pos(static_cast<std::size_t>(c.nd));
  const Index total = cells_of(c.kernel);
  for (Index w = 0; w < total; ++w) {
    Index rest = w;
    for (int i = c.nd - 1; i >= 0; --i) {
      const auto u = static_cast<std::size_t>(i);
      pos[u] = per_dim[u][static_cast<std::size_t>(rest % c.kernel[u])];
      rest /= c.kernel[u];
    }
    out.push_back(flat(pos, c.f_shape));
  }
  return out;
}

// Naive forward and backward for loss <out, dout>; layouts as the kernel's (channel-first).
Result reference(const Case& c, const std::vector<double>& q, const std::vector<double>& kv,
                 const std::vector<double>& dout) {
  const Index qn = cells_of(c.q_shape), fn = cells_of(c.f_shape), C = c.heads * c.dim;
  const double sc = 1.0 / std::sqrt(static_cast<double>(c.dim));
  Result r;
  r.out.assign(q.size(), 0.0);
  r.dq.assign(q.size(), 0.0);
  r.dkv.assign(kv.size(), 0.0);
  r.lse.assign(static_cast<std::size_t>(c.batch * c.heads * qn), 0.0);
  auto Q = [&](Index n, Index h, Index e, Index i) { return ((n * C + h * c.dim + e) * qn + i); };
  auto K = [&](Index n, Index h, Index e, Index f) {
    return ((n * 2 * C + h * c.dim + e) * fn + f);
  };
  auto V = [&](Index n, Index h, Index e, Index f) {
    return ((n * 2 * C + C + h * c.dim + e) * fn + f);
  };
  auto at = [](const std::vector<double>& v, Index i) { return v[static_cast<std::size_t>(i)]; };
  for (Index n = 0; n < c.batch; ++n)
    for (Index h = 0; h < c.heads; ++h)
      for (Index i = 0; i < qn; ++i) {
        const std::vector<Index> w = window_of(c, i);
        std::vector<double> s(w.size()), p(w.size()), dp(w.size());
        double mx = -INFINITY;
        for (std::size_t t = 0; t < w.size(); ++t) {
          double acc = 0;
          for (Index e = 0; e < c.dim; ++e) acc += at(q, Q(n, h, e, i)) * at(kv, K(n, h, e, w[t]));
          s[t] = sc * acc;
          mx = std::max(mx, s[t]);
        }
        double sum = 0;
        for (std::size_t t = 0; t < w.size(); ++t) sum += std::exp(s[t] - mx);
        r.lse[static_cast<std::size_t>((n * c.heads + h) * qn + i)] = mx + std::log(sum);
        double pdp = 0;
        for (std::size_t t = 0; t < w.size(); ++t) {
          p[t] = std::exp(s[t] - mx) / sum;
          double g = 0;
          for (Index e = 0; e < c.dim; ++e) {
            r.out[static_cast<std::size_t>(Q(n, h, e, i))] += p[t] * at(kv, V(n, h, e, w[t]));
            g += at(dout, Q(n, h, e, i)) * at(kv, V(n, h, e, w[t]));
            r.dkv[static_cast<std::size_t>(V(n, h, e, w[t]))] += p[t] * at(dout, Q(n, h, e, i));
          }
          dp[t] = g;
          pdp += p[t] * g;
        }
        for (std::size_t t = 0; t < w.size(); ++t) {
          const double ds = p[t] * (dp[t] - pdp);
          for (Index e = 0; e < c.dim; ++e) {
            r.dq[static_cast<std::size_t>(Q(n, h, e, i))] += sc * ds * at(kv, K(n, h, e, w[t]));
            r.dkv[static_cast<std::size_t>(K(n, h, e, w[t]))] += sc * ds * at(q, Q(n, h, e, i));
          }
        }
      }
  return r;
}

template <class T>
Result run_kernel(const Case& c, const std::vector<double>& q, const std::vector<double>& kv,
                  const std::vector<double>& dout, Index tile_cells) {
  NeighborhoodDesc d;
  d.nd = c.nd;
  d.batch = c.batch;
  d.heads = c.heads;
  d.dim = c.dim;
  d.type = std::is_same_v<T, double> ? DType::f64 : DType::f32;
  d.tile_cells = tile_cells;
  for (int i = 0; i < c.nd; ++i) {
    const auto u = static_cast<std::size_t>(i);
    d.extent[i] = c.extent[u];
    d.kernel[i] = c.kernel[u];
    d.dilation[i] = c.dilation[u];
    d.q_lo[i] = c.q_lo[u];
    d.q_shape[i] = c.q_shape[u];
    d.f_lo[i] = c.f_lo[u];
    d.f_shape[i] = c.f_shape[u];
  }
  auto cast = [](const std::vector<double>& v) { return std::vector<T>(v.begin(), v.end()); };
  const std::vector<T> qt = cast(q), kvt = cast(kv), gt = cast(dout);
  std::vector<T> out(q.size()), dq(q.size()), dkv(kv.size(), T(0));
  Result r;
  r.lse.assign(static_cast<std::size_t>(c.batch * c.heads * cells_of(c.q_shape)), 0.0);
  cpu::neighborhood_attention_forward(d, qt.data(), kvt.data(), out.data(), r.lse.data());
  cpu::neighborhood_attention_backward(d, qt.data(), kvt.data(), out.data(), gt.data(),
                                       r.lse.data(), dq.data(), dkv.data());
  r.out.assign(out.begin(), out.end());
  r.dq.assign(dq.begin(), dq.end());
  r.dkv.assign(dkv.begin(), dkv.end());
  return r;
}

double rel_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    num = std::max(num, std::abs(a[i] - b[i]));
    den = std::max(den, std::abs(b[i]));
  }
  return num / (den > 0 ? den : 1.0);
}

std::vector<double> randoms(std::mt19937& rng, Index n) {
  std::uniform_real_distribution<double> u(-1.5, 1.5);
  std::vector<double> v(static_cast<std::size_t>(n));
  for (double& x : v) x = u(rng);
  return v;
}

}  // namespace

TEST_CASE("neighbourhood attention kernel equals the definition, in any bands", "[kernels][na]") {
  std::vector<Case> cases;
  // 1-D, the whole grid, odd kernel, dilation 2 (two interleaved classes).
  cases.push_back({1, {37}, {5}, {2}, {0}, {37}, {0}, {37}});
  // 2-D, even kernel (4 x 3), dilation (1, 2); queries a block inside the frame, whose windows
  // reach frame rows above and below (as a shard with its halo).
  cases.push_back({2, {20, 17}, {4, 3}, {1, 2}, {6, 0}, {7, 17}, {3, 0}, {13, 17}});
  // 2-D at the border: queries of the last rows, windows shifted inward; dilation 3 in rows.
  cases.push_back({2, {24, 9}, {3, 5}, {3, 1}, {18, 0}, {6, 9}, {12, 0}, {12, 9}});
  // 3-D, kernel (3, 2, 3), dilation (2, 1, 1).
  cases.push_back({3, {9, 6, 5}, {3, 2, 3}, {2, 1, 1}, {0, 0, 0}, {9, 6, 5}, {0, 0, 0}, {9, 6, 5}});
  cases.back().batch = 2;
  std::mt19937 rng(11);
  for (const Case& c : cases) {
    const Index C = c.heads * c.dim, qn = cells_of(c.q_shape), fn = cells_of(c.f_shape);
    const auto q = randoms(rng, c.batch * C * qn), kv = randoms(rng, c.batch * 2 * C * fn),
               dout = randoms(rng, c.batch * C * qn);
    const Result want = reference(c, q, kv, dout);
    for (Index tile : {Index{0}, Index{1}, Index{40}}) {  // default bands, a row each, a few rows
      INFO("nd " << c.nd << " band cells " << tile);
      const Result r64 = run_kernel<double>(c, q, kv, dout, tile);
      CHECK(rel_diff(r64.out, want.out) < 1e-13);
      CHECK(rel_diff(r64.lse, want.lse) < 1e-13);
      CHECK(rel_diff(r64.dq, want.dq) < 1e-13);
      CHECK(rel_diff(r64.dkv, want.dkv) < 1e-13);
      const Result r32 = run_kernel<float>(c, q, kv, dout, tile);
      CHECK(rel_diff(r32.out, want.out) < 2e-6);
      CHECK(rel_diff(r32.dq, want.dq) < 2e-6);
      CHECK(rel_diff(r32.dkv, want.dkv) < 2e-6);
    }
  }
}
