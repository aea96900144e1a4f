// Pooling kernels against an independent float64 reference (direct loops over kernel
// offsets, dilation, uncounted ceil-mode padding), adjoint identity, finite-difference
// gradients, ties, strided windows.
#include <catch2/catch.hpp>
#include <numeric>

#include "kernels/pool.hpp"
#include "tests/kernels/op_test_util.hpp"

using namespace tessera;
using namespace tessera::kernels;
using namespace tessera::test_ops;

namespace {

// Visits every multi-index of `ext` in row-major order.
template <class Fn>
void odometer(const std::vector<Index>& ext, Fn&& fn) {
  for (Index e : ext)
    if (e <= 0) return;
  std::vector<Index> i(ext.size(), 0);
  while (true) {
    fn(i);
    int d = static_cast<int>(ext.size()) - 1;
    while (d >= 0 && ++i[d] == ext[d]) i[d--] = 0;
    if (d < 0) return;
  }
}

std::vector<Index> ref_out(const PoolDesc& d) {
  std::vector<Index> o(d.nd);
  for (int k = 0; k < d.nd; ++k)
    o[k] = (d.in[k] + d.pad_lo[k] + d.pad_hi[k] - d.dilation[k] * (d.kernel[k] - 1) - 1) /
               d.stride[k] +
           1;
  return o;
}

// Reference pooling of contiguous x; for max also the plane index of each argmax.
struct RefPool {
  std::vector<double> y;
  std::vector<Index> arg;
};
RefPool ref_forward(const PoolDesc& d, const std::vector<double>& x) {
  const std::vector<Index> out = ref_out(d), in(d.in, d.in + d.nd), ker(d.kernel, d.kernel + d.nd);
  const Index plane = std::accumulate(in.begin(), in.end(), Index{1}, std::multiplies<>());
  RefPool r;
  for (Index nc = 0; nc < d.n * d.c; ++nc)
    odometer(out, [&](const std::vector<Index>& o) {
      double best = 0, sum = 0;
      Index arg = -1, real = 0;
      odometer(ker, [&](const std::vector<Index>& kk) {
        Index lin = 0;
        for (int k = 0; k < d.nd; ++k) {
          const Index p = o[k] * d.stride[k] - d.pad_lo[k] + kk[k] * d.dilation[k];
          if (p < 0 || p >= d.in[k]) return;  // padding: -inf for max, 0 for avg
          lin = lin * d.in[k] + p;
        }
        const double v = x[nc * plane + lin];
        ++real;
        sum += v;
        if (arg < 0 || v > best) {
          best = v;
          arg = lin;
        }
      });
      // The window's cells inside the counted padded extent (the kernel volume, but for a
      // window overhanging uncounted padding).
      Index vol = 1;
      for (int k = 0; k < d.nd; ++k) {
        const Index start = o[k] * d.stride[k] - d.pad_lo[k];
        vol *= std::min(start + d.kernel[k], d.in[k] + d.pad_hi[k] - d.uncounted_hi[k]) - start;
      }
      r.arg.push_back(nc * plane + arg);
      if (d.kind == PoolKind::Max)
        r.y.push_back(best);
      else
        r.y.push_back(sum / static_cast<double>(d.count_include_pad ? vol : real));
    });
  return r;
}

// Reference backward: scatter of dy through the same windows.
std::vector<double> ref_backward(const PoolDesc& d, const std::vector<double>& x,
                                 const std::vector<double>& dy) {
  std::vector<double> dx(x.size(), 0.0);
  if (d.kind == PoolKind::Max) {
    const RefPool r = ref_forward(d, x);
    for (std::size_t i = 0; i < dy.size(); ++i) dx[r.arg[i]] += dy[i];
    return dx;
  }
  // Average pooling is linear: dx_j = sum_i dy_i * y_i(e_j).
  std::vector<double> e(x.size(), 0.0);
  for (std::size_t j = 0; j < x.size(); ++j) {
    e[j] = 1.0;
    const RefPool r = ref_forward(d, e);
    e[j] = 0.0;
    for (std::size_t i = 0; i < dy.size(); ++i) dx[j] += dy[i] * r.y[i];
  }
  return dx;
}

Index volume(const PoolDesc& d, bool out) {
  Index v = d.n * d.c;
  for (int k = 0; k < d.nd; ++k) v *= out ? d.out(k) : d.in[k];
  return v;
}

std::vector<Index> x_shape(const PoolDesc& d) {
  std::vector<Index> s{d.n, d.c};
  for (int k = 0; k < d.nd; ++k) s.push_back(d.in[k]);
  return s;
}

PoolDesc random_pool(std::mt19937& rng, int nd) {
  PoolDesc d;
  d.nd = nd;
  d.n = rand_in(rng, 1, 2);
  d.c = rand_in(rng, 1, 3);
  d.kind = rng() % 2 ? PoolKind::Max : PoolKind::Avg;
  d.count_include_pad = rng() % 2;
  for (int k = 0; k < nd; ++k) {
    while (true) {
      d.in[k] = rand_in(rng, 1, nd == 3 ? 5 : 8);
      d.kernel[k] = rand_in(rng, 1, 4);
      d.stride[k] = rand_in(rng, 1, 3);
      d.pad_lo[k] = rand_in(rng, 0, d.kernel[k] - 1);
      d.pad_hi[k] = rand_in(rng, 0, d.kernel[k] - 1);
      d.dilation[k] = d.kind == PoolKind::Max && rng() % 2 ? rand_in(rng, 2, 3) : 1;
      d.uncounted_hi[k] = d.kind == PoolKind::Avg ? rand_in(rng, 0, d.pad_hi[k]) : 0;
      if (d.in[k] + d.pad_lo[k] + d.pad_hi[k] < d.span(k)) continue;
      // Every window holds a real cell (dilation may step over a short input).
      bool real = true;
      for (Index o = 0; o < d.out(k); ++o) {
        bool any = false;
        for (Index j = 0; j < d.kernel[k]; ++j) {
          const Index p = o * d.stride[k] - d.pad_lo[k] + j * d.dilation[k];
          any = any || (p >= 0 && p < d.in[k]);
        }
        real = real && any;
      }
      if (!real) continue;
      break;
    }
  }
  return d;
}

template <class T>
void check_against_reference(PoolDesc d, std::mt19937& rng, bool strided, bool ties) {
  d.type = std::is_same_v<T, double> ? DType::f64 : DType::f32;
  const StridedWindow w(x_shape(d), rng, !strided);
  for (int k = 0; k < 2 + d.nd; ++k) d.x_strides[k] = strided ? w.stride[k] : 0;
  const std::size_t nx = static_cast<std::size_t>(volume(d, false)),
                    ny = static_cast<std::size_t>(volume(d, true));
  const std::vector<double> x = ties ? random_integers(nx, rng, 3) : random_vector(nx, rng);
  const std::vector<double> dy = random_vector(ny, rng);
  const double tol = std::is_same_v<T, double> ? 1e-12 : 2e-6;

  const std::vector<T> xb = w.buffer_with<T>(x, 99.0);
  std::vector<T> y(ny);
  pool_forward(Device::host(), d, xb.data() + w.origin, y.data());
  const RefPool r = ref_forward(d, x);
  INFO("nd " << d.nd << " max " << (d.kind == PoolKind::Max) << " in " << d.in[0] << "," << d.in[1]
             << "," << d.in[2] << " k " << d.kernel[0] << "," << d.kernel[1] << "," << d.kernel[2]
             << " s " << d.stride[0] << "," << d.stride[1] << "," << d.stride[2] << " strided "
             << strided << " ties " << ties);
  REQUIRE(max_abs_diff(to_double(y), r.y) <= tol * (1 + max_abs(r.y)));

  // dx over the window only, overwritten (garbage inside beforehand), margins untouched.
  std::vector<T> dxb = w.buffer_with<T>(random_vector(nx, rng), -7.0);
  const std::vector<T> dyt = as<T>(dy);
  pool_backward(Device::host(), d, xb.data() + w.origin, dyt.data(), dxb.data() + w.origin);
  const std::vector<double> dx_ref = ref_backward(d, to_double(as<T>(x)), to_double(dyt));
  REQUIRE(max_abs_diff(w.gather(dxb), dx_ref) <= tol * (1 + max_abs(dx_ref)) * 4);
  REQUIRE(w.outside_untouched(dxb, -7.0));
}

}  // namespace

TEST_CASE("pooling equals the float64 reference (1-3 d, any kernel/stride/padding)",
          "[kernels][pool]") {
  std::mt19937 rng(11);
  int overlapping = 0, kernel_ne_stride = 0, asymmetric = 0, dilated = 0, uncounted = 0;
  for (int trial = 0; trial < 240; ++trial) {
    const PoolDesc d = random_pool(rng, 1 + trial % 3);
    for (int k = 0; k < d.nd; ++k) {
      overlapping += d.stride[k] < d.kernel[k];
      kernel_ne_stride += d.stride[k] != d.kernel[k];
      asymmetric += d.pad_lo[k] != d.pad_hi[k];
      dilated += d.dilation[k] > 1;
      uncounted += d.uncounted_hi[k] > 0 && d.count_include_pad;
    }
    const bool strided = trial % 2 == 1, ties = trial % 4 >= 2;
    check_against_reference<double>(d, rng, strided, ties);
    check_against_reference<float>(d, rng, strided, ties);
  }
  // The random configurations do cover the cases that matter.
  REQUIRE(overlapping > 50);
  REQUIRE(kernel_ne_stride > 100);
  REQUIRE(asymmetric > 50);
  REQUIRE(dilated > 40);
  REQUIRE(uncounted > 10);
}

TEST_CASE("max pooling ties go to the first cell of the window", "[kernels][pool]") {
  // Windows of 3 over [1, 3, 3, 2, 3]: maxima at cells 1, 1, 2 (first of equal values).
  PoolDesc d;
  d.nd = 1;
  d.type = DType::f64;
  d.in[0] = 5;
  d.kernel[0] = 3;
  const std::vector<double> x{1, 3, 3, 2, 3}, dy{1, 10, 100};
  std::vector<double> y(3), dx(5, -1.0);
  pool_forward(Device::host(), d, x.data(), y.data());
  REQUIRE(y == std::vector<double>{3, 3, 3});
  pool_backward(Device::host(), d, x.data(), dy.data(), dx.data());
  REQUIRE(dx == std::vector<double>{0, 11, 100, 0, 0});
}

TEST_CASE("average pooling backward is the adjoint of the forward", "[kernels][pool]") {
  std::mt19937 rng(12);
  for (int trial = 0; trial < 60; ++trial) {
    PoolDesc d = random_pool(rng, 1 + trial % 3);
    d.kind = PoolKind::Avg;
    for (int k = 0; k < 3; ++k) d.dilation[k] = 1;  // average pooling has none
    d.type = DType::f64;
    const StridedWindow w(x_shape(d), rng, trial % 2 == 0);
    for (int k = 0; k < 2 + d.nd; ++k) d.x_strides[k] = trial % 2 ? w.stride[k] : 0;
    const std::vector<double> x = random_vector(volume(d, false), rng),
                              v = random_vector(volume(d, true), rng);
    const std::vector<double> xb = w.buffer_with<double>(x, 0.0);
    std::vector<double> y(v.size()), dxb(xb.size(), 0.0);
    pool_forward(Device::host(), d, xb.data() + w.origin, y.data());
    pool_backward(Device::host(), d, nullptr, v.data(), dxb.data() + w.origin);
    REQUIRE(std::abs(dot(y, v) - dot(x, w.gather(dxb))) <= 1e-12 * (1 + std::abs(dot(y, v))));
  }
}

TEST_CASE("pooling gradients match finite differences (float64, no ties)", "[kernels][pool]") {
  std::mt19937 rng(13);
  for (int trial = 0; trial < 30; ++trial) {
    PoolDesc d = random_pool(rng, 1 + trial % 3);
    d.type = DType::f64;
    const std::size_t nx = volume(d, false), ny = volume(d, true);
    // Distinct values 0.01 apart: the argmax does not move under a step of 1e-6.
    std::vector<double> x(nx);
    std::iota(x.begin(), x.end(), 0.0);
    std::shuffle(x.begin(), x.end(), rng);
    for (auto& e : x) e *= 0.01;
    const std::vector<double> wv = random_vector(ny, rng);
    auto loss = [&](const std::vector<double>& xx) {
      std::vector<double> y(ny);
      pool_forward(Device::host(), d, xx.data(), y.data());
      return dot(wv, y);
    };
    std::vector<double> dx(nx);
    pool_backward(Device::host(), d, x.data(), wv.data(), dx.data());
    const double h = 1e-6;
    double err = 0;
    for (std::size_t i = 0; i < nx; ++i) {
      std::vector<double> xp = x, xm = x;
      xp[i] += h;
      xm[i] -= h;
      err = std::max(err, std::abs((loss(xp) - loss(xm)) / (2 * h) - dx[i]));
    }
    REQUIRE(err < 1e-7);
  }
}

TEST_CASE("invalid pooling descriptors throw", "[kernels][pool]") {
  std::vector<double> x(64), y(64);
  PoolDesc d;
  d.type = DType::f64;
  d.in[0] = 4;
  d.kernel[0] = 2;
  d.pad_lo[0] = 2;  // the first window lies entirely in the padding
  REQUIRE_THROWS_AS(pool_forward(Device::host(), d, x.data(), y.data()), Error);
  d.pad_lo[0] = 0;
  d.kernel[0] = 5;  // larger than the padded extent
  REQUIRE_THROWS_AS(pool_forward(Device::host(), d, x.data(), y.data()), Error);
  d.kernel[0] = 2;
  d.nd = 4;
  REQUIRE_THROWS_AS(pool_forward(Device::host(), d, x.data(), y.data()), Error);
  d.nd = 1;
  d.stride[0] = 0;
  REQUIRE_THROWS_AS(pool_forward(Device::host(), d, x.data(), y.data()), Error);
}

TEST_CASE(
    "pooling an output slab from its input window (as a shard with halo does) equals the global "
    "pooling",
    "[kernels][pool]") {
  std::mt19937 rng(14);
  for (int trial = 0; trial < 120; ++trial) {
    PoolDesc g = random_pool(rng, 1 + trial % 3);
    g.type = DType::f64;
    const Index out0 = g.out(0);
    const std::vector<double> x = random_integers(volume(g, false), rng, 4),  // ties included
        dy = random_vector(volume(g, true), rng);
    std::vector<double> y(dy.size()), dx(x.size());
    pool_forward(Device::host(), g, x.data(), y.data());
    pool_backward(Device::host(), g, x.data(), dy.data(), dx.data());
    // Split the outputs of dim 0 at a random cut; each slab reads the input rows its
    // windows cover, with the global padding only where those windows leave the domain.
    const Index cut = rand_in(rng, 0, out0);
    std::vector<double> dx_sum(x.size(), 0.0);
    Index inner_in = 1, inner_out = 1;
    for (int k = 1; k < g.nd; ++k) inner_in *= g.in[k], inner_out *= g.out(k);
    for (auto [olo, ohi] : {std::pair<Index, Index>{0, cut}, {cut, out0}}) {
      if (olo == ohi) continue;
      const Index start = olo * g.stride[0] - g.pad_lo[0];
      const Index end = (ohi - 1) * g.stride[0] - g.pad_lo[0] + g.span(0);
      const Index a = std::max<Index>(start, 0), b = std::min(end, g.in[0]);
      PoolDesc w = g;
      w.in[0] = b - a;
      w.pad_lo[0] = a - start;
      w.pad_hi[0] = end - b;
      // Of the padding the slab reaches, what lies past the counted padding is uncounted.
      w.uncounted_hi[0] = std::max<Index>(0, w.pad_hi[0] - (g.pad_hi[0] - g.uncounted_hi[0]));
      // The window is rows [a, b) of the global buffer: strides of the global tensor.
      const Index row = inner_in;
      w.x_strides[0] = g.c * g.in[0] * row;
      w.x_strides[1] = g.in[0] * row;
      Index st = 1;
      for (int k = g.nd - 1; k >= 0; --k) {
        w.x_strides[2 + k] = st;
        st *= g.in[k];
      }
      REQUIRE(w.out(0) == ohi - olo);
      std::vector<double> yw(g.n * g.c * (ohi - olo) * inner_out);
      pool_forward(Device::host(), w, x.data() + a * row, yw.data());
      // Compare with the slab of the global output; gather the slab's dy likewise.
      std::vector<double> dyw(yw.size());
      bool same = true;
      for (Index nc = 0; nc < g.n * g.c; ++nc)
        for (Index o = olo; o < ohi; ++o)
          for (Index r = 0; r < inner_out; ++r) {
            const Index gi = (nc * out0 + o) * inner_out + r,
                        wi = (nc * (ohi - olo) + o - olo) * inner_out + r;
            same = same && yw[wi] == y[gi];
            dyw[wi] = dy[gi];
          }
      REQUIRE(same);
      // Backward into the window rows; the slabs' dx add up to the global dx.
      std::vector<double> dxw(x.size(), 0.0);
      pool_backward(Device::host(), w, x.data() + a * row, dyw.data(), dxw.data() + a * row);
      for (std::size_t i = 0; i < x.size(); ++i) dx_sum[i] += dxw[i];
    }
    REQUIRE(max_abs_diff(dx_sum, dx) <= 1e-12);
  }
}
