// Upsampling windows against an independent float64 reference of the whole global
// output (PyTorch's formulas in floating point), needed-input ranges, the adjoint
// identity, partitions of the output, finite differences, strided windows.
#include <catch2/catch.hpp>
#include <cmath>

#include "kernels/upsample.hpp"
#include "tests/kernels/op_test_util.hpp"

using namespace tessera;
using namespace tessera::kernels;
using namespace tessera::test_ops;

namespace {

// Global reference: 1-d taps in floating point, PyTorch's area_pixel source index (with
// aligned corners: the ratio of the extents less one).
struct RefTap {
  Index i0, i1;
  double l0, l1;
};
RefTap ref_tap(UpsampleMode m, Index scale, Index G, Index o) {
  if (m == UpsampleMode::Nearest) {
    const Index i = static_cast<Index>(std::floor(static_cast<double>(o) / scale));
    return {i, i, 1.0, 0.0};
  }
  double src = 0;
  if (m == UpsampleMode::LinearAlignCorners) {
    // align_corners=True: src = o (G - 1) / (G scale - 1), 0 for a single output cell.
    if (G * scale > 1) src = static_cast<double>(o * (G - 1)) / static_cast<double>(G * scale - 1);
  } else {
    src = (o + 0.5) / static_cast<double>(scale) - 0.5;
    if (src < 0) src = 0;
  }
  const Index i0 = static_cast<Index>(std::floor(src));
  const Index i1 = std::min(i0 + 1, G - 1);
  return {i0, i1, 1.0 - (src - i0), src - i0};
}

struct Geometry {
  int nd;
  Index n, c;
  UpsampleMode mode;
  Index scale[3], G[3];
  Index in_plane() const { return G[0] * (nd > 1 ? G[1] : 1) * (nd > 2 ? G[2] : 1); }
  Index out_global(int k) const { return G[k] * scale[k]; }
  Index out_plane() const {
    Index v = 1;
    for (int k = 0; k < nd; ++k) v *= out_global(k);
    return v;
  }
};

// Full global output (n, c, G*scale...) as a dense linear map applied to x.
std::vector<double> ref_global(const Geometry& g, const std::vector<double>& x) {
  std::vector<double> y(static_cast<std::size_t>(g.n * g.c * g.out_plane()), 0.0);
  const Index O[3] = {g.out_global(0), g.nd > 1 ? g.out_global(1) : 1,
                      g.nd > 2 ? g.out_global(2) : 1};
  const Index I[3] = {g.G[0], g.nd > 1 ? g.G[1] : 1, g.nd > 2 ? g.G[2] : 1};
  for (Index nc = 0; nc < g.n * g.c; ++nc)
    for (Index a = 0; a < O[0]; ++a)
      for (Index b = 0; b < O[1]; ++b)
        for (Index e = 0; e < O[2]; ++e) {
          const RefTap t0 = ref_tap(g.mode, g.scale[0], I[0], a);
          const RefTap t1 = g.nd > 1 ? ref_tap(g.mode, g.scale[1], I[1], b) : RefTap{0, 0, 1, 0};
          const RefTap t2 = g.nd > 2 ? ref_tap(g.mode, g.scale[2], I[2], e) : RefTap{0, 0, 1, 0};
          double v = 0;
          for (int p = 0; p < 2; ++p)
            for (int q = 0; q < 2; ++q)
              for (int r = 0; r < 2; ++r) {
                const double w = (p ? t0.l1 : t0.l0) * (q ? t1.l1 : t1.l0) * (r ? t2.l1 : t2.l0);
                const Index i =
                    ((p ? t0.i1 : t0.i0) * I[1] + (q ? t1.i1 : t1.i0)) * I[2] + (r ? t2.i1 : t2.i0);
                v += w * x[nc * g.in_plane() + i];
              }
          y[(nc * O[0] + a) * O[1] * O[2] + b * O[2] + e] = v;
        }
  return y;
}

// The global cells [lo, lo + ext) of an (n, c, spatial) array with global extents `full`.
std::vector<double> extract(const std::vector<double>& full, Index nc,
                            const std::vector<Index>& ext_full, const std::vector<Index>& lo,
                            const std::vector<Index>& ext) {
  std::vector<double> out;
  const int nd = static_cast<int>(ext.size());
  Index plane = 1, wplane = 1;
  for (int k = 0; k < nd; ++k) plane *= ext_full[k], wplane *= ext[k];
  for (Index i = 0; i < nc; ++i)
    for (Index j = 0; j < wplane; ++j) {
      Index r = j, off = 0, mul = 1;
      for (int k = nd - 1; k >= 0; --k) {
        off += (r % ext[k] + lo[k]) * mul;
        r /= ext[k];
        mul *= ext_full[k];
      }
      out.push_back(full[i * plane + off]);
    }
  return out;
}

UpsampleMode random_mode(std::mt19937& rng) {
  const UpsampleMode modes[] = {UpsampleMode::Nearest, UpsampleMode::Linear,
                                UpsampleMode::LinearAlignCorners};
  return modes[rng() % 3];
}

Geometry random_geometry(std::mt19937& rng, int nd) {
  Geometry g{nd, rand_in(rng, 1, 2), rand_in(rng, 1, 2), random_mode(rng), {1, 1, 1}, {1, 1, 1}};
  for (int k = 0; k < nd; ++k) {
    g.scale[k] = rand_in(rng, 1, 3);
    g.G[k] = rand_in(rng, 1, nd == 3 ? 3 : 6);
  }
  return g;
}

// A random output window (sometimes touching the global edges), the input window it
// needs grown by random margins (possibly past the global edge: never read).
UpsampleDesc random_window(const Geometry& g, std::mt19937& rng) {
  UpsampleDesc d;
  d.nd = g.nd;
  d.n = g.n;
  d.c = g.c;
  d.mode = g.mode;
  for (int k = 0; k < g.nd; ++k) {
    d.scale[k] = g.scale[k];
    d.in_global[k] = g.G[k];
    const Index O = g.out_global(k);
    const int pick = static_cast<int>(rng() % 4);
    Index lo = rand_in(rng, 0, O - 1), hi = rand_in(rng, lo + 1, O);
    if (pick == 0) lo = 0;
    if (pick == 1) hi = O;
    d.out_lo[k] = lo;
    d.out_n[k] = hi - lo;
    Index ilo, ihi;
    upsample_input_range(g.mode, g.scale[k], g.G[k], lo, hi - lo, &ilo, &ihi);
    d.in_lo[k] = ilo - rand_in(rng, 0, 1);
    d.in_n[k] = ihi + rand_in(rng, 0, 1) - d.in_lo[k];
  }
  return d;
}

std::vector<Index> in_shape(const UpsampleDesc& d) {
  std::vector<Index> s{d.n, d.c};
  for (int k = 0; k < d.nd; ++k) s.push_back(d.in_n[k]);
  return s;
}

// x window values: global cells where they exist, garbage (1e30) outside the domain.
std::vector<double> window_values(const Geometry& g, const UpsampleDesc& d,
                                  const std::vector<double>& xg) {
  std::vector<double> v;
  const Index I[3] = {g.G[0], g.nd > 1 ? g.G[1] : 1, g.nd > 2 ? g.G[2] : 1};
  const Index lo[3] = {d.in_lo[0], g.nd > 1 ? d.in_lo[1] : 0, g.nd > 2 ? d.in_lo[2] : 0};
  const Index ext[3] = {d.in_n[0], g.nd > 1 ? d.in_n[1] : 1, g.nd > 2 ? d.in_n[2] : 1};
  for (Index nc = 0; nc < g.n * g.c; ++nc)
    for (Index a = lo[0]; a < lo[0] + ext[0]; ++a)
      for (Index b = lo[1]; b < lo[1] + ext[1]; ++b)
        for (Index e = lo[2]; e < lo[2] + ext[2]; ++e) {
          const bool inside = a >= 0 && a < I[0] && b >= 0 && b < I[1] && e >= 0 && e < I[2];
          v.push_back(inside ? xg[nc * g.in_plane() + (a * I[1] + b) * I[2] + e] : 1e30);
        }
  return v;
}

Index out_count(const UpsampleDesc& d) {
  Index v = d.n * d.c;
  for (int k = 0; k < d.nd; ++k) v *= d.out_n[k];
  return v;
}

template <class T>
void check_window(const Geometry& g, std::mt19937& rng, bool strided) {
  UpsampleDesc d = random_window(g, rng);
  d.type = std::is_same_v<T, double> ? DType::f64 : DType::f32;
  const StridedWindow w(in_shape(d), rng, !strided);
  for (int k = 0; k < 2 + d.nd; ++k) d.x_strides[k] = strided ? w.stride[k] : 0;
  const std::vector<double> xg = random_vector(g.n * g.c * g.in_plane(), rng);
  const std::vector<double> yg = ref_global(g, to_double(as<T>(xg)));
  std::vector<Index> oext(g.nd), olo(g.nd), ofull(g.nd);
  for (int k = 0; k < g.nd; ++k) {
    oext[k] = d.out_n[k];
    olo[k] = d.out_lo[k];
    ofull[k] = g.out_global(k);
  }
  const std::vector<double> y_ref = extract(yg, g.n * g.c, ofull, olo, oext);
  const double tol = std::is_same_v<T, double> ? 1e-13 : 1e-6;

  const std::vector<T> xb = w.buffer_with<T>(window_values(g, d, xg), 5.0);
  std::vector<T> y(static_cast<std::size_t>(out_count(d)));
  upsample_forward(Device::host(), d, xb.data() + w.origin, y.data());
  INFO("nd " << g.nd << " mode " << static_cast<int>(g.mode) << " scale " << g.scale[0] << ","
             << g.scale[1] << "," << g.scale[2] << " G " << g.G[0] << "," << g.G[1] << "," << g.G[2]
             << " out_lo " << d.out_lo[0] << " out_n " << d.out_n[0] << " strided " << strided);
  REQUIRE(max_abs_diff(to_double(y), y_ref) <= tol);

  // Backward: the reference is the dense adjoint of the global map, with dy zero outside
  // the output window, restricted to the input window (zero outside the domain).
  const std::vector<double> dy = random_vector(y.size(), rng);
  const std::vector<T> dyt = as<T>(dy);
  std::vector<T> dxb = w.buffer_with<T>(random_vector(w.count(), rng), -3.0);
  upsample_backward(Device::host(), d, dyt.data(), dxb.data() + w.origin);
  std::vector<double> dyg(yg.size(), 0.0);
  {
    // Scatter the window's dy into the global output.
    std::vector<double> idx(yg.size());
    for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<double>(i);
    const std::vector<double> where = extract(idx, g.n * g.c, ofull, olo, oext);
    for (std::size_t i = 0; i < where.size(); ++i)
      dyg[static_cast<std::size_t>(where[i])] = static_cast<double>(dyt[i]);
  }
  std::vector<double> dxg(xg.size(), 0.0), e(xg.size(), 0.0);
  for (std::size_t j = 0; j < xg.size(); ++j) {
    e[j] = 1.0;
    dxg[j] = dot(ref_global(g, e), dyg);
    e[j] = 0.0;
  }
  std::vector<double> dx_ref = window_values(g, d, dxg);
  for (auto& v : dx_ref)
    if (v == 1e30) v = 0.0;  // cells outside the domain: no output reads them
  REQUIRE(max_abs_diff(w.gather(dxb), dx_ref) <= tol * 10);
  REQUIRE(w.outside_untouched(dxb, -3.0));
}

}  // namespace

TEST_CASE("upsample windows equal the global float64 reference", "[kernels][upsample]") {
  std::mt19937 rng(21);
  for (int trial = 0; trial < 240; ++trial) {
    const Geometry g = random_geometry(rng, 1 + trial % 3);
    check_window<double>(g, rng, trial % 2 == 1);
    check_window<float>(g, rng, trial % 2 == 0);
  }
}

TEST_CASE("upsample_input_range is exactly the set of input cells read", "[kernels][upsample]") {
  for (auto mode : {UpsampleMode::Nearest, UpsampleMode::Linear, UpsampleMode::LinearAlignCorners})
    for (Index s = 1; s <= 4; ++s)
      for (Index G = 1; G <= 7; ++G)
        for (Index lo = 0; lo < G * s; ++lo)
          for (Index hi = lo + 1; hi <= G * s; ++hi) {
            Index rlo = G, rhi = -1;
            for (Index o = lo; o < hi; ++o) {
              const RefTap t = ref_tap(mode, s, G, o);
              rlo = std::min(rlo, t.i0);
              rhi = std::max(rhi, t.i1 + 1);
            }
            Index a, b;
            upsample_input_range(mode, s, G, lo, hi - lo, &a, &b);
            REQUIRE(a == rlo);
            REQUIRE(b == rhi);
          }
}

TEST_CASE("upsample throws when the input window lacks a needed cell", "[kernels][upsample]") {
  std::mt19937 rng(22);
  std::vector<double> x(4096, 0.0), y(4096);
  for (int trial = 0; trial < 100; ++trial) {
    const Geometry g = random_geometry(rng, 1 + trial % 3);
    UpsampleDesc d = random_window(g, rng);
    d.type = DType::f64;
    const int k = static_cast<int>(rng() % g.nd);
    Index lo, hi;
    upsample_input_range(g.mode, g.scale[k], g.G[k], d.out_lo[k], d.out_n[k], &lo, &hi);
    d.in_lo[k] = lo;
    d.in_n[k] = hi - lo;
    REQUIRE_NOTHROW(upsample_forward(Device::host(), d, x.data(), y.data()));
    if (rng() % 2) {
      d.in_lo[k] = lo + 1;
      d.in_n[k] = hi - lo - 1;
    } else {
      d.in_n[k] = hi - lo - 1;
    }
    REQUIRE_THROWS_AS(upsample_forward(Device::host(), d, x.data(), y.data()), Error);
    REQUIRE_THROWS_AS(upsample_backward(Device::host(), d, y.data(), x.data()), Error);
  }
  UpsampleDesc d;
  d.in_global[0] = 3;
  d.scale[0] = 2;
  d.out_lo[0] = 5;
  d.out_n[0] = 2;  // past the global output [0, 6)
  REQUIRE_THROWS_AS(upsample_forward(Device::host(), d, x.data(), y.data()), Error);
}

TEST_CASE("upsample backward is the adjoint of the window forward", "[kernels][upsample]") {
  std::mt19937 rng(23);
  for (int trial = 0; trial < 120; ++trial) {
    const Geometry g = random_geometry(rng, 1 + trial % 3);
    UpsampleDesc d = random_window(g, rng);
    d.type = DType::f64;
    const StridedWindow w(in_shape(d), rng, trial % 2 == 0);
    for (int k = 0; k < 2 + d.nd; ++k) d.x_strides[k] = trial % 2 ? w.stride[k] : 0;
    const std::vector<double> x = random_vector(w.count(), rng),
                              v = random_vector(out_count(d), rng);
    const std::vector<double> xb = w.buffer_with<double>(x, 0.0);
    std::vector<double> y(v.size()), dxb(xb.size(), 0.0);
    upsample_forward(Device::host(), d, xb.data() + w.origin, y.data());
    upsample_backward(Device::host(), d, v.data(), dxb.data() + w.origin);
    REQUIRE(std::abs(dot(y, v) - dot(x, w.gather(dxb))) <= 1e-12 * (1 + std::abs(dot(y, v))));
  }
}

TEST_CASE("upsample backward over a partition of the output sums to the full backward",
          "[kernels][upsample]") {
  std::mt19937 rng(24);
  for (int trial = 0; trial < 40; ++trial) {
    Geometry g = random_geometry(rng, 1 + trial % 3);
    g.mode = trial % 2 ? UpsampleMode::Linear : UpsampleMode::LinearAlignCorners;
    g.G[0] = std::max<Index>(g.G[0], 2);
    const Index O0 = g.out_global(0);
    std::vector<Index> shape_full{g.n, g.c};
    for (int k = 0; k < g.nd; ++k) shape_full.push_back(g.out_global(k));
    const std::vector<double> dy = random_vector(g.n * g.c * g.out_plane(), rng);
    auto backward = [&](Index olo, Index on) {
      // Output slab [olo, olo+on) along dim 0, full along the others; dx over the whole domain.
      UpsampleDesc d;
      d.nd = g.nd;
      d.n = g.n;
      d.c = g.c;
      d.mode = g.mode;
      d.type = DType::f64;
      for (int k = 0; k < g.nd; ++k) {
        d.scale[k] = g.scale[k];
        d.in_global[k] = g.G[k];
        d.in_n[k] = g.G[k];
        d.out_n[k] = g.out_global(k);
      }
      d.out_lo[0] = olo;
      d.out_n[0] = on;
      std::vector<Index> lo(g.nd, 0), ext(g.nd);
      for (int k = 0; k < g.nd; ++k) ext[k] = d.out_n[k];
      lo[0] = olo;
      const std::vector<double> dyw = extract(
          dy, g.n * g.c, std::vector<Index>(shape_full.begin() + 2, shape_full.end()), lo, ext);
      std::vector<double> dx(g.n * g.c * g.in_plane());
      upsample_backward(Device::host(), d, dyw.data(), dx.data());
      return dx;
    };
    const Index cut = rand_in(rng, 1, O0 - 1);
    const std::vector<double> full = backward(0, O0), a = backward(0, cut),
                              b = backward(cut, O0 - cut);
    std::vector<double> sum(full.size());
    for (std::size_t i = 0; i < sum.size(); ++i) sum[i] = a[i] + b[i];
    REQUIRE(max_abs_diff(sum, full) <= 1e-13);
  }
}

TEST_CASE("linear upsample gradient matches finite differences (float64)", "[kernels][upsample]") {
  std::mt19937 rng(25);
  for (int trial = 0; trial < 20; ++trial) {
    Geometry g = random_geometry(rng, 1 + trial % 3);
    g.mode = trial % 2 ? UpsampleMode::Linear : UpsampleMode::LinearAlignCorners;
    UpsampleDesc d = random_window(g, rng);
    d.type = DType::f64;
    Index nx = d.n * d.c;
    for (int k = 0; k < d.nd; ++k) nx *= d.in_n[k];
    const std::vector<double> x = random_vector(nx, rng), wv = random_vector(out_count(d), rng);
    auto loss = [&](const std::vector<double>& xx) {
      std::vector<double> y(wv.size());
      upsample_forward(Device::host(), d, xx.data(), y.data());
      return dot(wv, y);
    };
    std::vector<double> dx(nx);
    upsample_backward(Device::host(), d, wv.data(), dx.data());
    double err = 0;
    const double h = 1e-5;
    for (Index i = 0; i < nx; ++i) {
      std::vector<double> xp = x, xm = x;
      xp[i] += h;
      xm[i] -= h;
      err = std::max(err, std::abs((loss(xp) - loss(xm)) / (2 * h) - dx[i]));
    }
    REQUIRE(err < 1e-8);
  }
}
