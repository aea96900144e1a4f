// CUDA op kernels against their CPU versions (pooling, upsampling, activations, bias,
// reductions, normalization, the edge convolution), float32 and float64. They skip, saying so,
// where no device exists (the CI machine builds the CUDA code but has no GPU).
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <iostream>
#include <limits>
#include <random>
#include <vector>

#include "kernels/activation.hpp"
#include "kernels/bias.hpp"
#include "kernels/convert.hpp"
#include "kernels/edge_conv.hpp"
#include "kernels/grid_hash.hpp"
#include "kernels/norm.hpp"
#include "kernels/pool.hpp"
#include "kernels/reduce.hpp"
#include "kernels/upsample.hpp"
#include "kernels/device/device.hpp"
#include "kernels/device/memory.hpp"
#include "tests/support/have_device.hpp"
#include "tests/harness/mpi_test.hpp"

using namespace tessera;
using namespace tessera::kernels;

namespace {

// A device copy of a host vector, freed on scope exit.
template <class T>
struct Dev {
  std::size_t n;
  T* p;
  explicit Dev(const std::vector<T>& h) : n(h.size()), p(static_cast<T*>(device::alloc(bytes()))) {
    if (n) device::copy(p, h.data(), bytes(), device::Copy::HostToDevice);
  }
  ~Dev() { device::free(p); }
  Dev(const Dev&) = delete;
  Dev& operator=(const Dev&) = delete;
  std::size_t bytes() const { return std::max<std::size_t>(n, 1) * sizeof(T); }
  std::vector<T> host() const {
    std::vector<T> h(n);
    if (n) device::copy(h.data(), p, bytes(), device::Copy::DeviceToHost);
    return h;
  }
};

template <class T>
std::vector<T> random_vec(std::size_t n, std::mt19937& rng, double lo = -1, double hi = 1) {
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<T> v(n);
  for (auto& e : v) e = static_cast<T>(u(rng));
  return v;
}

Index rnd(std::mt19937& rng, Index lo, Index hi) {
  return lo + static_cast<Index>(rng() % static_cast<unsigned>(hi - lo + 1));
}

template <class A, class B>
bool close(const std::vector<A>& a, const std::vector<B>& b, double rel) {
  if (a.size() != b.size()) return false;
  double m = 0, scale = 1;
  for (std::size_t i = 0; i < a.size(); ++i) {
    m = std::max(m, std::abs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
    scale = std::max(scale, std::abs(static_cast<double>(b[i])));
  }
  return m <= rel * scale;
}

template <class T>
constexpr DType scalar_of() {
  return std::is_same_v<T, double> ? DType::f64 : DType::f32;
}
template <class T>
constexpr double tol() {
  return std::is_same_v<T, double> ? 1e-12 : 1e-5;
}

// Parent-buffer strides for a window of `shape` with margins of 0..2 on every dim.
Index window_strides(const std::vector<Index>& shape, std::mt19937& rng, Index* strides,
                     Index& origin) {
  Index s = 1;
  origin = 0;
  for (std::size_t d = shape.size(); d-- > 0;) {
    const Index lo = rnd(rng, 0, 2), parent = shape[d] + lo + rnd(rng, 0, 2);
    strides[d] = s;
    origin += lo * s;
    s *= parent;
  }
  return s;
}

template <class T>
void pool_case(std::mt19937& rng, int nd) {
  PoolDesc d;
  d.nd = nd;
  d.type = scalar_of<T>();
  d.n = rnd(rng, 1, 2);
  d.c = rnd(rng, 1, 3);
  d.kind = rng() % 2 ? PoolKind::Max : PoolKind::Avg;
  d.count_include_pad = rng() % 2;
  std::vector<Index> shape{d.n, d.c};
  for (int k = 0; k < nd; ++k) {
    do {
      d.in[k] = rnd(rng, 1, 9);
      d.kernel[k] = rnd(rng, 1, 4);
      d.stride[k] = rnd(rng, 1, 3);
      d.pad_lo[k] = rnd(rng, 0, d.kernel[k] - 1);
      d.pad_hi[k] = rnd(rng, 0, d.kernel[k] - 1);
    } while (d.in[k] + d.pad_lo[k] + d.pad_hi[k] < d.kernel[k] ||
             (d.out(k) - 1) * d.stride[k] - d.pad_lo[k] >= d.in[k]);
    shape.push_back(d.in[k]);
  }
  Index origin;
  const Index size = window_strides(shape, rng, d.x_strides, origin);
  Index ny = d.n * d.c;
  for (int k = 0; k < nd; ++k) ny *= d.out(k);
  std::vector<T> x = random_vec<T>(size, rng);
  if (rng() % 2)
    for (auto& v : x) v = static_cast<T>(std::round(v * 2));  // ties
  const std::vector<T> dy = random_vec<T>(ny, rng), dx0 = random_vec<T>(size, rng);
  std::vector<T> y(ny), dx = dx0;
  pool_forward(Device::host(), d, x.data() + origin, y.data());
  pool_backward(Device::host(), d, x.data() + origin, dy.data(), dx.data() + origin);
  Dev<T> gx(x), gy{std::vector<T>(ny)}, gdy(dy), gdx(dx0);
  pool_forward(Device::cuda(), d, gx.p + origin, gy.p);
  pool_backward(Device::cuda(), d, gx.p + origin, gdy.p, gdx.p + origin);
  MPI_REQUIRE(close(gy.host(), y, tol<T>()));
  MPI_REQUIRE(close(gdx.host(), dx, tol<T>()));
}

template <class T>
void upsample_case(std::mt19937& rng, int nd) {
  UpsampleDesc d;
  d.nd = nd;
  d.type = scalar_of<T>();
  d.n = rnd(rng, 1, 2);
  d.c = rnd(rng, 1, 3);
  const UpsampleMode modes[] = {UpsampleMode::Nearest, UpsampleMode::Linear,
                                UpsampleMode::LinearAlignCorners};
  d.mode = modes[rng() % 3];
  std::vector<Index> shape{d.n, d.c};
  Index ny = d.n * d.c;
  for (int k = 0; k < nd; ++k) {
    d.scale[k] = rnd(rng, 1, 3);
    d.in_global[k] = rnd(rng, 1, 8);
    const Index O = d.in_global[k] * d.scale[k];
    d.out_lo[k] = rnd(rng, 0, O - 1);
    d.out_n[k] = rnd(rng, 1, O - d.out_lo[k]);
    Index lo, hi;
    upsample_input_range(d.mode, d.scale[k], d.in_global[k], d.out_lo[k], d.out_n[k], &lo, &hi);
    d.in_lo[k] = lo - rnd(rng, 0, 1);
    d.in_n[k] = hi + rnd(rng, 0, 1) - d.in_lo[k];
    shape.push_back(d.in_n[k]);
    ny *= d.out_n[k];
  }
  Index origin;
  const Index size = window_strides(shape, rng, d.x_strides, origin);
  const std::vector<T> x = random_vec<T>(size, rng), dy = random_vec<T>(ny, rng),
                       dx0 = random_vec<T>(size, rng);
  std::vector<T> y(ny), dx = dx0;
  upsample_forward(Device::host(), d, x.data() + origin, y.data());
  upsample_backward(Device::host(), d, dy.data(), dx.data() + origin);
  Dev<T> gx(x), gy{std::vector<T>(ny)}, gdy(dy), gdx(dx0);
  upsample_forward(Device::cuda(), d, gx.p + origin, gy.p);
  upsample_backward(Device::cuda(), d, gdy.p, gdx.p + origin);
  MPI_REQUIRE(close(gy.host(), y, tol<T>()));
  MPI_REQUIRE(close(gdx.host(), dx, tol<T>()));
}

template <class T>
void elementwise_cases(std::mt19937& rng) {
  const Index n = 100003;
  const std::vector<T> x = random_vec<T>(n, rng, -8, 8), dy = random_vec<T>(n, rng);
  Dev<T> gx(x), gdy(dy), gy{std::vector<T>(n)}, gdx{std::vector<T>(n)};
  for (Activation a : {Activation::ReLU, Activation::GELU, Activation::SiLU, Activation::Tanh}) {
    std::vector<T> y(n), dx(n);
    activation_forward(Device::host(), a, scalar_of<T>(), n, x.data(), y.data());
    activation_backward(Device::host(), a, scalar_of<T>(), n, x.data(), dy.data(), dx.data());
    activation_forward(Device::cuda(), a, scalar_of<T>(), n, gx.p, gy.p);
    activation_backward(Device::cuda(), a, scalar_of<T>(), n, gx.p, gdy.p, gdx.p);
    INFO(name_of(a));
    MPI_REQUIRE(close(gy.host(), y, tol<T>()));
    MPI_REQUIRE(close(gdx.host(), dx, tol<T>()));
  }
  const Index bn = 2, bc = 5, inner = 3001;
  const std::vector<T> b = random_vec<T>(bc, rng);
  std::vector<T> yb(x.begin(), x.begin() + bn * bc * inner), db(bc);
  Dev<T> gyb(yb), gb(b), gdb{std::vector<T>(bc)};
  bias_add(Device::host(), scalar_of<T>(), bn, bc, inner, yb.data(), b.data());
  bias_add(Device::cuda(), scalar_of<T>(), bn, bc, inner, gyb.p, gb.p);
  MPI_REQUIRE(close(gyb.host(), yb, tol<T>()));
  bias_backward(Device::host(), scalar_of<T>(), bn, bc, inner, dy.data(), db.data());
  bias_backward(Device::cuda(), scalar_of<T>(), bn, bc, inner, gdy.p, gdb.p);
  MPI_REQUIRE(close(gdb.host(), db, tol<T>()));
}

template <class T>
void reduce_and_norm_cases(std::mt19937& rng) {
  const DType type = scalar_of<T>();
  for (Index n : {Index{0}, Index{1}, Index{1000}, Index{3000017}}) {
    const std::vector<T> x = random_vec<T>(n, rng, -1, 2);
    Dev<T> gx(x);
    const double s = reduce_sum(Device::host(), type, n, x.data()),
                 q = reduce_sum_squares(Device::host(), type, n, x.data());
    MPI_REQUIRE(std::abs(reduce_sum(Device::cuda(), type, n, gx.p) - s) <=
                1e-12 * (1 + std::abs(s)));
    MPI_REQUIRE(std::abs(reduce_sum_squares(Device::cuda(), type, n, gx.p) - q) <= 1e-12 * (1 + q));
    if (n > 0)
      MPI_REQUIRE(std::abs(reduce_mean(Device::cuda(), type, n, gx.p) -
                           reduce_mean(Device::host(), type, n, x.data())) <= 1e-12);
  }
  for (StatKind kind : {StatKind::PerGroup, StatKind::PerChannel, StatKind::PerPosition}) {
    const Index groups = kind == StatKind::PerGroup ? 2 : 1;
    const StatLayout l{kind, 2, 6, 517, groups};
    const std::vector<T> x = random_vec<T>(l.elements(), rng, -1, 2),
                         dy = random_vec<T>(l.elements(), rng), gamma = random_vec<T>(l.c, rng),
                         beta = random_vec<T>(l.c, rng);
    std::vector<double> sum(l.count()), sq(l.count());
    stat_sums(Device::host(), l, type, x.data(), sum.data(), sq.data());
    Dev<T> gx(x), gdy(dy), gg(gamma), gbeta(beta);
    Dev<double> gsum(sum), gsq(sq);
    stat_sums(Device::cuda(), l, type, gx.p, gsum.p, gsq.p);
    MPI_REQUIRE(close(gsum.host(), sum, 1e-12));
    MPI_REQUIRE(close(gsq.host(), sq, 1e-12));
    const double M = static_cast<double>(l.size());
    std::vector<double> mean(l.count()), rstd(l.count());
    for (Index g = 0; g < l.count(); ++g) {
      mean[g] = sum[g] / M;
      rstd[g] = 1 / std::sqrt(sq[g] / M - mean[g] * mean[g] + 1e-5);
    }
    Dev<double> gmean(mean), grstd(rstd);
    const NormArgs h{l, type, mean.data(), rstd.data(), gamma.data(), beta.data()};
    const NormArgs d{l, type, gmean.p, grstd.p, gg.p, gbeta.p};
    std::vector<T> y(x.size()), dx(x.size());
    std::vector<double> s1(l.count()), s2(l.count()), dgam(l.c), dbet(l.c);
    norm_forward(Device::host(), h, x.data(), y.data());
    norm_backward_sums(Device::host(), h, x.data(), dy.data(), s1.data(), s2.data());
    norm_backward_dx(Device::host(), h, x.data(), dy.data(), s1.data(), s2.data(), M, dx.data());
    norm_param_grads(Device::host(), h, x.data(), dy.data(), dgam.data(), dbet.data());
    Dev<T> gy(y), gdx(dx);
    Dev<double> gs1(s1), gs2(s2), gdgam(dgam), gdbet(dbet);
    norm_forward(Device::cuda(), d, gx.p, gy.p);
    norm_backward_sums(Device::cuda(), d, gx.p, gdy.p, gs1.p, gs2.p);
    MPI_REQUIRE(close(gs1.host(), s1, 1e-12));
    MPI_REQUIRE(close(gs2.host(), s2, 1e-12));
    norm_backward_dx(Device::cuda(), d, gx.p, gdy.p, gs1.p, gs2.p, M, gdx.p);
    norm_param_grads(Device::cuda(), d, gx.p, gdy.p, gdgam.p, gdbet.p);
    MPI_REQUIRE(close(gy.host(), y, tol<T>()));
    MPI_REQUIRE(close(gdx.host(), dx, tol<T>() * 10));
    MPI_REQUIRE(close(gdgam.host(), dgam, 1e-12));
    MPI_REQUIRE(close(gdbet.host(), dbet, 1e-12));
  }
}

}  // namespace

TEST_CASE("CUDA pooling equals CPU pooling", "[gpu]") {
  if (!test::have_device()) return;
  std::mt19937 rng(71);
  for (int trial = 0; trial < 60; ++trial) {
    pool_case<float>(rng, 1 + trial % 3);
    pool_case<double>(rng, 1 + trial % 3);
  }
}

TEST_CASE("CUDA upsampling equals CPU upsampling", "[gpu]") {
  if (!test::have_device()) return;
  std::mt19937 rng(72);
  for (int trial = 0; trial < 60; ++trial) {
    upsample_case<float>(rng, 1 + trial % 3);
    upsample_case<double>(rng, 1 + trial % 3);
  }
}

TEST_CASE("CUDA activations and bias equal the CPU ones", "[gpu]") {
  if (!test::have_device()) return;
  std::mt19937 rng(73);
  elementwise_cases<float>(rng);
  elementwise_cases<double>(rng);
}

TEST_CASE("CUDA reductions and normalization equal the CPU ones", "[gpu]") {
  if (!test::have_device()) return;
  std::mt19937 rng(74);
  reduce_and_norm_cases<float>(rng);
  reduce_and_norm_cases<double>(rng);
}

TEST_CASE("CUDA type conversion equals the host's", "[gpu]") {
  if (!test::have_device()) return;
  std::mt19937 rng(31);
  std::vector<float> x = random_vec<float>(5000, rng, -1e4, 1e4);
  x.push_back(0.0f);
  x.push_back(-0.0f);
  x.push_back(std::numeric_limits<float>::infinity());
  // NaNs (CUDA's canonical 0x7fffffff, negative, signalling) stay NaNs of their sign.
  for (std::uint32_t nan : {0x7fffffffu, 0xffffffffu, 0x7f800001u, 0x7fc00000u})
    x.push_back(std::bit_cast<float>(nan));
  const auto n = static_cast<std::int64_t>(x.size());
  std::vector<std::uint16_t> hb(x.size());
  kernels::convert(Device::host(), DType::f32, DType::bf16, n, x.data(), hb.data());
  const Dev<float> dx(x);
  Dev<std::uint16_t> db(std::vector<std::uint16_t>(x.size()));
  kernels::convert(Device::cuda(), DType::f32, DType::bf16, n, dx.p, db.p);
  device::synchronize(Device::cuda());
  MPI_CHECK(db.host() == hb);
  Dev<float> dy(std::vector<float>(x.size()));
  kernels::convert(Device::cuda(), DType::bf16, DType::f32, n, db.p, dy.p);
  std::vector<float> hy(x.size());
  kernels::convert(Device::host(), DType::bf16, DType::f32, n, hb.data(), hy.data());
  device::synchronize(Device::cuda());
  const std::vector<float> got = dy.host();  // bits: NaN != NaN as floats
  MPI_CHECK(std::memcmp(got.data(), hy.data(), hy.size() * sizeof(float)) == 0);
  MPI_CHECK(std::isnan(hy.back()));
}

TEST_CASE("CUDA grid hash queries equal the host's", "[gpu]") {
  if (!test::have_device()) return;
  std::mt19937 rng(23);
  const Index n = 3000, nq = 500, k = 8, cap = 16;
  std::vector<double> xyz = random_vec<double>(3 * static_cast<std::size_t>(n), rng);
  for (Index i = 0; i < 200; ++i)  // exact duplicates: ties broken by id
    std::copy_n(xyz.begin(), 3, xyz.begin() + 3 * (n - 1 - i));
  std::vector<std::int64_t> ids(static_cast<std::size_t>(n));
  for (Index i = 0; i < n; ++i) ids[static_cast<std::size_t>(i)] = (i * 7919) % n;
  const std::vector<double> q =
      random_vec<double>(3 * static_cast<std::size_t>(nq), rng, -1.2, 1.2);
  const GridHash host(xyz.data(), ids.data(), n, MemSpace::Host);
  const GridHash dev(xyz.data(), ids.data(), n, MemSpace::Cuda);
  const Dev<double> dq(q);
  auto run_knn = [&](const GridHash& g, const double* qp, const Device& d) {
    std::vector<Index> idx(static_cast<std::size_t>(nq * k)), cnt(static_cast<std::size_t>(nq));
    std::vector<double> d2(idx.size());
    if (d.is_host()) {
      grid_knn(d, g.view(), qp, nq, k, idx.data(), d2.data(), cnt.data());
      return std::make_pair(idx, cnt);
    }
    Dev<Index> di(idx), dc(cnt);
    Dev<double> dd(d2);
    grid_knn(d, g.view(), qp, nq, k, di.p, dd.p, dc.p);
    device::synchronize(d);
    return std::make_pair(di.host(), dc.host());
  };
  MPI_CHECK(run_knn(host, q.data(), Device::host()) == run_knn(dev, dq.p, Device::cuda()));
  auto run_ball = [&](const GridHash& g, const double* qp, const Device& d) {
    std::vector<Index> idx(static_cast<std::size_t>(nq * cap)), cnt(static_cast<std::size_t>(nq));
    std::vector<double> d2(idx.size());
    if (d.is_host()) {
      grid_within(d, g.view(), qp, nq, 0.01, cap, idx.data(), d2.data(), cnt.data());
      return std::make_pair(idx, cnt);
    }
    Dev<Index> di(idx), dc(cnt);
    Dev<double> dd(d2);
    grid_within(d, g.view(), qp, nq, 0.01, cap, di.p, dd.p, dc.p);
    device::synchronize(d);
    return std::make_pair(di.host(), dc.host());
  };
  MPI_CHECK(run_ball(host, q.data(), Device::host()) == run_ball(dev, dq.p, Device::cuda()));
}

TEST_CASE("CUDA activation over strided views equals the CPU one", "[gpu]") {
  if (!test::have_device()) return;
  // y in the interior of a padded (2, 3, 8+2, 5+2) buffer, x and dx plain (2, 3, 8, 5).
  std::mt19937 rng(29);
  StridedCopy map;
  map.ndim = 4;
  const Index shape[4] = {2, 3, 8, 5}, padded[4] = {2, 3, 10, 7};
  Index ps = 1, ds = 1;
  for (int d = 3; d >= 0; --d) {
    map.shape[d] = shape[d];
    map.src_stride[d] = ps;
    map.dst_stride[d] = ds;
    ps *= shape[d];
    ds *= padded[d];
  }
  const std::size_t n = 2 * 3 * 8 * 5, np = 2 * 3 * 10 * 7;
  const Index origin = padded[3] + 1;  // the interior's first element in the padded buffer
  const std::vector<double> x = random_vec<double>(n, rng), dy = random_vec<double>(np, rng);
  std::vector<double> y_host(np, 0.0), dx_host(n, 0.0);
  activation_forward(Device::host(), Activation::GELU, DType::f64, map, x.data(),
                     y_host.data() + origin);
  activation_backward(Device::host(), Activation::GELU, DType::f64, map, x.data(),
                      dy.data() + origin, dx_host.data());
  const Dev<double> dxin(x), ddy(dy);
  Dev<double> dyout(std::vector<double>(np, 0.0)), ddx(std::vector<double>(n, 0.0));
  activation_forward(Device::cuda(), Activation::GELU, DType::f64, map, dxin.p, dyout.p + origin);
  activation_backward(Device::cuda(), Activation::GELU, DType::f64, map, dxin.p, ddy.p + origin,
                      ddx.p);
  device::synchronize(Device::cuda());
  MPI_CHECK(close(dyout.host(), y_host, 1e-12));
  MPI_CHECK(close(ddx.host(), dx_host, 1e-12));
}

namespace {
template <class T>
void edge_conv_case(std::mt19937& rng, bool mean, Activation act) {
  const Index m = 37, k = 6, E = 7, O = 5;
  const EdgeConvShape s{m, k, E, O, mean, act};
  const auto e = random_vec<T>(static_cast<std::size_t>(m * k * E), rng);
  const auto w = random_vec<T>(static_cast<std::size_t>(O * E), rng);
  const auto b = random_vec<T>(static_cast<std::size_t>(O), rng);
  const auto dy = random_vec<T>(static_cast<std::size_t>(m * O), rng);
  std::vector<std::int64_t> ids(static_cast<std::size_t>(m * k));
  for (Index i = 0; i < m * k; ++i)  // some points miss neighbours, every 7th has none
    ids[static_cast<std::size_t>(i)] =
        ((i / k) % 7 == 6 || (i % k > 0 && rng() % 3 == 0)) ? -1 : static_cast<std::int64_t>(i);
  const DType t = scalar_of<T>();
  // Host.
  std::vector<T> z(static_cast<std::size_t>(m * k * O)), y(static_cast<std::size_t>(m * O)),
      de(e.size());
  std::vector<std::int64_t> am(y.size());
  std::vector<double> dw(static_cast<std::size_t>(O * E), 0.25),
      db(static_cast<std::size_t>(O), 0.5);
  edge_conv_forward(Device::host(), t, s, e.data(), ids.data(), w.data(), b.data(), z.data(),
                    y.data(), am.data());
  edge_conv_backward(Device::host(), t, s, e.data(), ids.data(), w.data(), z.data(), am.data(),
                     dy.data(), de.data(), dw.data(), db.data());
  // Device.
  Dev<T> de_(e), dw_(w), db_(b), ddy(dy), dz(z), dyo(y), dde(de);
  Dev<std::int64_t> dids(ids), dam(am);
  Dev<double> ddw(std::vector<double>(dw.size(), 0.25)), ddb(std::vector<double>(db.size(), 0.5));
  edge_conv_forward(Device::cuda(), t, s, de_.p, dids.p, dw_.p, db_.p, dz.p, dyo.p, dam.p);
  edge_conv_backward(Device::cuda(), t, s, de_.p, dids.p, dw_.p, dz.p, dam.p, ddy.p, dde.p, ddw.p,
                     ddb.p);
  device::synchronize(Device::cuda());
  MPI_CHECK(close(dyo.host(), y, tol<T>()));
  MPI_CHECK(close(dz.host(), z, tol<T>()));
  MPI_CHECK(dam.host() == am);
  MPI_CHECK(close(dde.host(), de, tol<T>()));
  MPI_CHECK(close(ddw.host(), dw, tol<T>()));
  MPI_CHECK(close(ddb.host(), db, tol<T>()));
}
}  // namespace

TEST_CASE("CUDA edge convolution equals the CPU one", "[gpu]") {
  if (!test::have_device()) return;
  std::mt19937 rng(91);
  for (bool mean : {false, true})
    for (Activation a : {Activation::GELU, Activation::ReLU}) {
      edge_conv_case<float>(rng, mean, a);
      edge_conv_case<double>(rng, mean, a);
    }
}

TEST_CASE("CUDA blocks freed by tensors are reused without cudaMalloc", "[gpu]") {
  if (!test::have_device()) return;
  release_cached_device_memory();
  device::reset_stats();
  const std::size_t live = memory_stats(MemSpace::Cuda).current;
  void* a = mem_alloc(MemSpace::Cuda, 1000);
  CHECK(device::stats().allocs == 1);
  std::vector<float> ones(250, 1.0f);
  device::copy(a, ones.data(), 1000, device::Copy::HostToDevice);
  mem_free(MemSpace::Cuda, a, 1000);
  CHECK(cached_device_bytes() == 1024);                 // a 512-byte granule
  CHECK(memory_stats(MemSpace::Cuda).current == live);  // cached bytes are not in use
  void* b = mem_alloc(MemSpace::Cuda, 1001);            // the same block size: no cudaMalloc
  CHECK(b == a);
  CHECK(device::stats().allocs == 1);
  CHECK(cached_device_bytes() == 0);
  device::memset_zero(b, 1001);  // stream order: the reused block holds what was queued last
  std::vector<float> back(250, 5.0f);
  device::copy(back.data(), b, 1000, device::Copy::DeviceToHost);
  CHECK(back == std::vector<float>(250, 0.0f));
  mem_free(MemSpace::Cuda, b, 1001);
  CHECK(release_cached_device_memory() == 1024);
  CHECK(cached_device_bytes() == 0);

  // A request that does not fit beside cached blocks of another size gives them back first.
  const std::size_t big = device::free_bytes() / 10 * 6;
  void* c = mem_alloc(MemSpace::Cuda, big);
  mem_free(MemSpace::Cuda, c, big);
  CHECK(cached_device_bytes() >= big);
  void* d = mem_alloc(MemSpace::Cuda, big + (1 << 20));
  CHECK(d != nullptr);
  CHECK(cached_device_bytes() == 0);
  mem_free(MemSpace::Cuda, d, big + (1 << 20));
  release_cached_device_memory();
}
