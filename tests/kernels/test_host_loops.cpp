// The host loops that walk rows and read tables (host_for_each_nc3, host_for_each_cell,
// the cell cursor, the per-position reduction, the pool/upsample tables) against the per-element
// functors they replace on the host (the CUDA kernels' form): the same values bit for bit, float32
// and float64.
#include <catch2/catch.hpp>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/host_loops.hpp"
#include "kernels/norm.hpp"
#include "kernels/norm_impl.hpp"
#include "kernels/pool.hpp"
#include "kernels/pad_impl.hpp"
#include "kernels/pool_impl.hpp"
#include "kernels/reduce.hpp"
#include "kernels/reduce_impl.hpp"
#include "kernels/upsample.hpp"
#include "kernels/upsample_impl.hpp"
#include "tests/kernels/op_test_util.hpp"

using namespace tessera;
using namespace tessera::kernels;
using namespace tessera::test_ops;

namespace {

Index pick(std::mt19937& rng, Index lo, Index hi) {  // in [lo, hi]
  return lo + static_cast<Index>(rng() % static_cast<unsigned>(hi - lo + 1));
}

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// A descriptor of nd spatial dims for element type T with a random batch and channels.
template <class Desc, class T>
Desc random_desc(std::mt19937& rng, int nd) {
  Desc d;
  d.nd = nd;
  d.type = std::is_same_v<T, double> ? DType::f64 : DType::f32;
  d.n = pick(rng, 1, 2);
  d.c = pick(rng, 1, 3);
  return d;
}

template <class T>
void upsample_case(std::mt19937& rng, UpsampleMode mode, int nd) {
  auto d = random_desc<UpsampleDesc, T>(rng, nd);
  d.mode = mode;
  for (int k = 0; k < nd; ++k) {
    d.scale[k] = pick(rng, 1, 3);
    d.in_global[k] = pick(rng, 1, 7);
    const Index O = d.scale[k] * d.in_global[k];
    d.out_lo[k] = pick(rng, 0, O - 1);
    d.out_n[k] = pick(rng, 1, O - d.out_lo[k]);
    Index lo, hi;
    upsample_input_range(mode, d.scale[k], d.in_global[k], d.out_lo[k], d.out_n[k], &lo, &hi);
    d.in_lo[k] = lo;
    d.in_n[k] = hi - lo;
  }
  const UpsampleGeom g = upsample_geometry(d, "test");
  const std::vector<T> x = as<T>(random_vector(static_cast<std::size_t>(g.in_count()), rng));
  const std::vector<T> dy = as<T>(random_vector(static_cast<std::size_t>(g.out_count()), rng));
  std::vector<T> y(dy.size()), y_ref(dy.size()), dx(x.size()), dx_ref(x.size());
  cpu::upsample_forward(d, x.data(), y.data());
  host_for_each(g.out_count(), UpsampleForward<T>{g, x.data(), y_ref.data()});
  CHECK(same_bits(y, y_ref));
  cpu::upsample_backward(d, dy.data(), dx.data());
  host_for_each(g.in_count(), UpsampleBackward<T>{g, dy.data(), dx_ref.data()});
  CHECK(same_bits(dx, dx_ref));
}

template <class T>
void pad_case(std::mt19937& rng, PadMode mode, int nd) {
  auto d = random_desc<PadDesc, T>(rng, nd);
  d.mode = mode;
  d.value = 0.25;
  for (int k = 0; k < nd; ++k) {
    d.in_global[k] = pick(rng, 1, 7);
    const Index most = mode == PadMode::Reflect ? d.in_global[k] - 1 : 4;
    const Index least = mode == PadMode::Circular ? 0 : -2;  // negative widths crop
    d.pad_lo[k] = pick(rng, least, most);
    d.pad_hi[k] = pick(rng, least, most);
    if (d.in_global[k] + d.pad_lo[k] + d.pad_hi[k] < 1) d.pad_lo[k] = d.pad_hi[k] = 0;
    const Index O = d.in_global[k] + d.pad_lo[k] + d.pad_hi[k];
    d.out_lo[k] = pick(rng, 0, O - 1);
    d.out_n[k] = pick(rng, 1, O - d.out_lo[k]);
    Index lo, hi;
    pad_input_range(mode, d.in_global[k], d.pad_lo[k], d.out_lo[k], d.out_n[k], &lo, &hi);
    if (hi <= lo) lo = 0, hi = 1;  // a window of constant padding only: any cell
    d.in_lo[k] = lo;
    d.in_n[k] = hi - lo;
  }
  const PadGeom g = pad_geometry(d, "test");
  const std::vector<T> x = as<T>(random_vector(static_cast<std::size_t>(g.in_count()), rng));
  const std::vector<T> dy = as<T>(random_vector(static_cast<std::size_t>(g.out_count()), rng));
  std::vector<T> y(dy.size()), y_ref(dy.size()), dx(x.size()), dx_ref(x.size());
  cpu::pad_forward(d, x.data(), y.data());
  host_for_each(g.out_count(), PadForward<T>{g, x.data(), y_ref.data()});
  CHECK(same_bits(y, y_ref));
  cpu::pad_backward(d, dy.data(), dx.data());
  host_for_each(g.in_count(), PadBackward<T>{g, dy.data(), dx_ref.data()});
  CHECK(same_bits(dx, dx_ref));
}

template <class T>
void pool_case(std::mt19937& rng, PoolKind kind, int nd) {
  auto d = random_desc<PoolDesc, T>(rng, nd);
  d.kind = kind;
  d.count_include_pad = rng() % 2 == 0;
  for (int k = 0; k < nd; ++k) {
    d.kernel[k] = pick(rng, 1, 3);
    d.stride[k] = pick(rng, 1, 3);
    d.pad_lo[k] = pick(rng, 0, d.kernel[k] / 2);
    d.pad_hi[k] = pick(rng, 0, d.kernel[k] / 2);
    d.in[k] = pick(rng, d.kernel[k], 9);
  }
  const PoolGeom g = pool_geometry(d, "test");
  // Small integers: ties for the max.
  const std::vector<T> x = as<T>(random_integers(static_cast<std::size_t>(g.in_count()), rng, 4));
  const std::vector<T> dy = as<T>(random_vector(static_cast<std::size_t>(g.out_count()), rng));
  std::vector<T> y(dy.size()), y_ref(dy.size()), dx(x.size()), dx_ref(x.size());
  cpu::pool_forward(d, x.data(), y.data());
  host_for_each(g.out_count(), PoolForward<T>{g, x.data(), y_ref.data()});
  CHECK(same_bits(y, y_ref));
  cpu::pool_backward(d, x.data(), dy.data(), dx.data());
  std::vector<Index> arg(static_cast<std::size_t>(g.out_count()));
  if (g.max) host_for_each(g.out_count(), PoolArgmax<T>{g, x.data(), arg.data()});
  host_for_each(g.in_count(), PoolBackward<T>{g, arg.data(), dy.data(), dx_ref.data()});
  CHECK(same_bits(dx, dx_ref));
}

template <class T>
void norm_case(std::mt19937& rng, StatKind kind) {
  const Index n = pick(rng, 1, 3), groups = kind == StatKind::PerGroup ? pick(rng, 1, 3) : 1;
  const Index c = groups * pick(rng, 1, 3), inner = pick(rng, 1, 150);
  NormArgs a;
  a.type = std::is_same_v<T, double> ? DType::f64 : DType::f32;
  a.layout = StatLayout{kind, n, c, inner, groups};
  const Index G = a.layout.count(), E = a.layout.elements();
  const std::vector<double> mean = random_vector(static_cast<std::size_t>(G), rng);
  const std::vector<double> rstd = random_vector(static_cast<std::size_t>(G), rng, 0.5, 2.0);
  const std::vector<T> gamma = as<T>(random_vector(static_cast<std::size_t>(c), rng));
  const std::vector<T> beta = as<T>(random_vector(static_cast<std::size_t>(c), rng));
  a.mean = mean.data();
  a.rstd = rstd.data();
  a.gamma = gamma.data();
  a.beta = beta.data();
  const std::vector<T> x = as<T>(random_vector(static_cast<std::size_t>(E), rng));
  const std::vector<T> dy = as<T>(random_vector(static_cast<std::size_t>(E), rng));
  const NormParams<T> p{a.layout, a.mean, a.rstd, gamma.data()};

  std::vector<T> y(x.size()), y_ref(x.size());
  cpu::norm_forward(a, x.data(), y.data());
  host_for_each(E, NormForward<T>{p, beta.data(), x.data(), y_ref.data()});
  CHECK(same_bits(y, y_ref));

  std::vector<double> s1(static_cast<std::size_t>(G)), s2(s1.size()), r1(s1.size()), r2(s1.size());
  cpu::norm_backward_sums(a, x.data(), dy.data(), s1.data(), s2.data());
  for (Index gi = 0; gi < G; ++gi) {  // the functor's add(g, j), cell by cell in order of j
    double u = 0, v = 0;
    for (Index j = 0; j < a.layout.size(); ++j)
      NormBackwardSums<T>{p, x.data(), dy.data(), nullptr, nullptr}.add(gi, j, u, v);
    r1[static_cast<std::size_t>(gi)] = u;
    r2[static_cast<std::size_t>(gi)] = v;
  }
  CHECK(same_bits(s1, r1));  // one chunk per group at these sizes: one sum in order
  CHECK(same_bits(s2, r2));

  std::vector<double> sum(s1.size()), sq(s1.size()), rsum(s1.size()), rsq(s1.size());
  cpu::stat_sums(a.layout, a.type, x.data(), sum.data(), sq.data());
  for (Index gi = 0; gi < G; ++gi) {
    double u = 0, v = 0;
    for (Index j = 0; j < a.layout.size(); ++j)
      StatSums<T>{a.layout, x.data(), nullptr, nullptr}.add(gi, j, u, v);
    rsum[static_cast<std::size_t>(gi)] = u;
    rsq[static_cast<std::size_t>(gi)] = v;
  }
  CHECK(same_bits(sum, rsum));
  CHECK(same_bits(sq, rsq));

  std::vector<T> dx(x.size()), dx_ref(x.size());
  cpu::norm_backward_dx(a, x.data(), dy.data(), s1.data(), s2.data(), 7.0, dx.data());
  host_for_each(
      E, NormBackwardDx<T>{p, x.data(), dy.data(), s1.data(), s2.data(), 1.0 / 7.0, dx_ref.data()});
  CHECK(same_bits(dx, dx_ref));

  const StatLayout byc = StatLayout::per_channel(n, c, inner);
  std::vector<double> dg(static_cast<std::size_t>(c)), db(dg.size()), rg(dg.size()), rb(dg.size());
  cpu::norm_param_grads(a, x.data(), dy.data(), dg.data(), db.data());
  for (Index ch = 0; ch < c; ++ch) {
    double u = 0, v = 0;
    for (Index j = 0; j < byc.size(); ++j)
      NormParamGrads<T>{p, byc, x.data(), dy.data(), nullptr, nullptr}.add(ch, j, u, v);
    rg[static_cast<std::size_t>(ch)] = u;
    rb[static_cast<std::size_t>(ch)] = v;
  }
  CHECK(same_bits(dg, rg));
  CHECK(same_bits(db, rb));
}

}  // namespace

TEST_CASE("host upsampling loops equal the per-element functors bit for bit",
          "[kernels][upsample]") {
  std::mt19937 rng(11);
  for (int it = 0; it < 40; ++it)
    for (int nd = 1; nd <= 3; ++nd)
      for (UpsampleMode m :
           {UpsampleMode::Nearest, UpsampleMode::Linear, UpsampleMode::LinearAlignCorners}) {
        upsample_case<float>(rng, m, nd);
        upsample_case<double>(rng, m, nd);
      }
}

TEST_CASE("host padding loops equal the per-element functors bit for bit", "[kernels][pad]") {
  std::mt19937 rng(13);
  for (int it = 0; it < 40; ++it)
    for (int nd = 1; nd <= 3; ++nd)
      for (PadMode m :
           {PadMode::Constant, PadMode::Reflect, PadMode::Replicate, PadMode::Circular}) {
        pad_case<float>(rng, m, nd);
        pad_case<double>(rng, m, nd);
      }
}

TEST_CASE("host pooling loops equal the per-element functors bit for bit", "[kernels][pool]") {
  std::mt19937 rng(12);
  for (int it = 0; it < 40; ++it)
    for (int nd = 1; nd <= 3; ++nd)
      for (PoolKind k : {PoolKind::Max, PoolKind::Avg}) {
        pool_case<float>(rng, k, nd);
        pool_case<double>(rng, k, nd);
      }
}

TEST_CASE("host normalization loops equal the per-element functors bit for bit",
          "[kernels][norm]") {
  std::mt19937 rng(13);
  for (int it = 0; it < 20; ++it)
    for (StatKind k : {StatKind::PerGroup, StatKind::PerChannel, StatKind::PerPosition}) {
      norm_case<float>(rng, k);
      norm_case<double>(rng, k);
    }
}
