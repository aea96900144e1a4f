// Losses over the global domain: sharded value and gradient equal a direct float64
// evaluation on the full tensors (1e-12), on 1-D, 2-D, 3-D and domain x data meshes,
// with uneven shards and replicated mesh axes; gradients match central finite
// differences; per-replica losses (data axis left out); float32; errors everywhere.
#include <cmath>
#include <limits>
#include <random>

#include "runtime/train/loss.hpp"
#include "tests/harness/mpi_test.hpp"
#include "tests/support/expect_error.hpp"
#include "tests/support/helpers.hpp"

using namespace tessera;

namespace {

Tensor random_tensor(std::mt19937& rng, const std::vector<Index>& shape, DType dt = DType::f64) {
  std::uniform_real_distribution<double> u(-1, 1);
  Tensor t = Tensor::empty(shape, dt);
  for (Index i = 0; i < t.numel(); ++i) {
    const double v = u(rng);
    if (dt == DType::f64)
      t.data<double>()[i] = v;
    else
      t.data<float>()[i] = static_cast<float>(v);
  }
  return t;
}

double get(const Tensor& t, Index i) {
  return t.dtype() == DType::f64 ? t.data<double>()[i] : t.data<float>()[i];
}

// Direct definitions on full tensors, samples [n0, n1) of dim 0.
double mse_ref(const Tensor& p, const Tensor& y, Index n0, Index n1) {
  const Index per = p.numel() / p.shape(0);
  double s = 0;
  for (Index i = n0 * per; i < n1 * per; ++i)
    s += (get(p, i) - get(y, i)) * (get(p, i) - get(y, i));
  return s / static_cast<double>((n1 - n0) * per);
}
double rel_ref(const Tensor& p, const Tensor& y, Index n0, Index n1) {
  const Index per = p.numel() / p.shape(0);
  double total = 0;
  for (Index n = n0; n < n1; ++n) {
    double a = 0, b = 0;
    for (Index i = n * per; i < (n + 1) * per; ++i) {
      a += (get(p, i) - get(y, i)) * (get(p, i) - get(y, i));
      b += get(y, i) * get(y, i);
    }
    total += std::sqrt(a / b);
  }
  return total / static_cast<double>(n1 - n0);
}
// Closed-form gradients of the same (independent of the library's code path).
Tensor mse_grad_ref(const Tensor& p, const Tensor& y) {
  Tensor g = Tensor::empty(p.shape(), DType::f64);
  for (Index i = 0; i < p.numel(); ++i)
    g.data<double>()[i] = 2 * (get(p, i) - get(y, i)) / static_cast<double>(p.numel());
  return g;
}
Tensor rel_grad_ref(const Tensor& p, const Tensor& y) {
  const Index N = p.shape(0), per = p.numel() / N;
  Tensor g = Tensor::empty(p.shape(), DType::f64);
  for (Index n = 0; n < N; ++n) {
    double a = 0, b = 0;
    for (Index i = n * per; i < (n + 1) * per; ++i) {
      a += (get(p, i) - get(y, i)) * (get(p, i) - get(y, i));
      b += get(y, i) * get(y, i);
    }
    for (Index i = n * per; i < (n + 1) * per; ++i)
      g.data<double>()[i] =
          (get(p, i) - get(y, i)) / (static_cast<double>(N) * std::sqrt(a) * std::sqrt(b));
  }
  return g;
}

double max_rel_diff(const Tensor& a, const Tensor& b) {
  double scale = 0, m = 0;
  for (Index i = 0; i < b.numel(); ++i) scale = std::max(scale, std::abs(get(b, i)));
  for (Index i = 0; i < a.numel(); ++i) m = std::max(m, std::abs(get(a, i) - get(b, i)));
  return m / std::max(scale, 1e-300);
}

// (N, C, D, H) placements per test mesh, with the batch on a data axis where one
// exists; `replicate_last` leaves the last mesh axis sharding nothing.
std::vector<Placement> dims_for(const Mesh& mesh, bool replicate_last) {
  std::vector<Placement> d(4, Replicate());
  if (mesh.names().back() == "data") {
    d[2] = Shard(0);
    if (!replicate_last) d[0] = Shard(1);
    return d;
  }
  const int used = replicate_last && mesh.ndim() > 1 ? mesh.ndim() - 1 : mesh.ndim();
  for (int a = 0; a < used; ++a) d[static_cast<std::size_t>(a == 2 ? 0 : a + 2)] = Shard(a);
  return d;
}

}  // namespace

TEST_CASE("sharded MSE and relative L2 equal the single-rank values and gradients", "[loss]") {
  std::mt19937 rng(3);  // same on every rank
  int cases = 0;
  for (const Mesh& mesh : test::test_meshes(MPI_COMM_WORLD)) {
    for (bool replicate_last : {false, true}) {
      for (int uneven = 0; uneven < 2; ++uneven) {
        const std::vector<Index> shape = {3, 2, 5 + static_cast<Index>(rng() % 3), 4};
        const auto dims = dims_for(mesh, replicate_last);
        std::vector<std::vector<Index>> sizes(4);
        if (uneven)
          for (int d = 0; d < 4; ++d)
            if (dims[static_cast<std::size_t>(d)].sharded())
              sizes[static_cast<std::size_t>(d)] =
                  test::random_sizes(rng, shape[static_cast<std::size_t>(d)],
                                     mesh.dim(dims[static_cast<std::size_t>(d)].axis));
        const ShardSpec spec(shape, dims, mesh, {}, sizes);
        const Tensor p = random_tensor(rng, shape), y = random_tensor(rng, shape);
        const ShardTensor ps = ShardTensor::scatter(mesh, p, spec),
                          ys = ShardTensor::scatter(mesh, y, spec);
        INFO("mesh " << mesh.str() << " spec " << spec.str());

        const LossResult m = mse_loss(ps, ys);
        const double mref = mse_ref(p, y, 0, shape[0]);
        MPI_CHECK(std::abs(m.value - mref) <= 1e-12 * mref);
        MPI_CHECK(m.grad.spec() == spec);
        MPI_CHECK(max_rel_diff(m.grad.gather_all(), mse_grad_ref(p, y)) < 1e-12);

        const LossResult r = relative_l2_loss(ps, ys);
        const double rref = rel_ref(p, y, 0, shape[0]);
        MPI_CHECK(std::abs(r.value - rref) <= 1e-12 * rref);
        MPI_CHECK(max_rel_diff(r.grad.gather_all(), rel_grad_ref(p, y)) < 1e-12);

        const LossResult nog = relative_l2_loss(ps, ys, false);
        MPI_CHECK(nog.value == r.value);
        MPI_CHECK(!nog.grad.local().defined());
        ++cases;
      }
    }
  }
  MPI_REQUIRE(cases >= 4);
}

TEST_CASE("loss gradients match central finite differences", "[loss]") {
  std::mt19937 rng(9);
  const Mesh mesh = Mesh::line(MPI_COMM_WORLD);
  const std::vector<Index> shape = {2, 1, 7, 3};
  const std::vector<Placement> dims = {Replicate(), Replicate(), Shard(0), Replicate()};
  const Tensor p = random_tensor(rng, shape), y = random_tensor(rng, shape);
  for (LossKind kind : {LossKind::Mse, LossKind::RelativeL2}) {
    Loss loss(kind);
    const Tensor g = loss(ShardTensor::scatter(mesh, p, dims), ShardTensor::scatter(mesh, y, dims))
                         .grad.gather_all();
    const double h = 1e-6;
    double worst = 0;
    for (Index i = 0; i < p.numel(); i += 3) {  // every third element
      double& slot = p.data<double>()[i];
      const double keep = slot;
      slot = keep + h;
      const double lp =
          loss(ShardTensor::scatter(mesh, p, dims), ShardTensor::scatter(mesh, y, dims), false)
              .value;
      slot = keep - h;
      const double lm =
          loss(ShardTensor::scatter(mesh, p, dims), ShardTensor::scatter(mesh, y, dims), false)
              .value;
      slot = keep;
      worst = std::max(worst, std::abs((lp - lm) / (2 * h) - g.data<double>()[i]));
    }
    INFO("kind " << static_cast<int>(kind) << " worst " << worst);
    MPI_CHECK(worst < 1e-8);
  }
}

TEST_CASE("per-replica losses: the data axis left out of the reduction", "[loss]") {
  int P = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  if (P % 2) return;  // needs a data axis of 2
  const Mesh mesh(MPI_COMM_WORLD, {P / 2, 2}, {"domain", "data"});
  std::mt19937 rng(4);
  const std::vector<Index> shape = {4, 2, 6, 3};
  const ShardSpec spec(shape, {Shard(1), Replicate(), Shard(0), Replicate()}, mesh);
  const Tensor p = random_tensor(rng, shape), y = random_tensor(rng, shape);
  const ShardTensor ps = ShardTensor::scatter(mesh, p, spec),
                    ys = ShardTensor::scatter(mesh, y, spec);
  const Box mine = ps.local_box();
  for (LossKind kind : {LossKind::Mse, LossKind::RelativeL2}) {
    Loss replica(kind, LossOptions{{0}});
    Loss global(kind);
    const LossResult lr = replica(ps, ys), lg = global(ps, ys);
    const double want = kind == LossKind::Mse ? mse_ref(p, y, mine.lo[0], mine.hi[0])
                                              : rel_ref(p, y, mine.lo[0], mine.hi[0]);
    MPI_CHECK(std::abs(lr.value - want) <= 1e-12 * want);
    // Equal batch shards: the replica gradient is data_size times the global one, so
    // averaging parameter gradients over data equals summing the global loss's.
    MPI_CHECK(max_rel_diff(lr.grad.local(), [&] {
                Tensor t = lg.grad.local().clone();
                for (Index i = 0; i < t.numel(); ++i) t.data<double>()[i] *= 2;
                return t;
              }()) < 1e-12);
  }
}

TEST_CASE("float32 losses accumulate in double", "[loss]") {
  std::mt19937 rng(8);
  const Mesh mesh = Mesh::line(MPI_COMM_WORLD);
  const std::vector<Index> shape = {2, 3, 9, 5};
  const std::vector<Placement> dims = {Replicate(), Replicate(), Shard(0), Replicate()};
  const Tensor p = random_tensor(rng, shape, DType::f32), y = random_tensor(rng, shape, DType::f32);
  const ShardTensor ps = ShardTensor::scatter(mesh, p, dims),
                    ys = ShardTensor::scatter(mesh, y, dims);
  const double mref = mse_ref(p, y, 0, 2), rref = rel_ref(p, y, 0, 2);
  const LossResult m = mse_loss(ps, ys), r = relative_l2_loss(ps, ys);
  MPI_CHECK(std::abs(m.value - mref) <= 1e-12 * mref);  // inputs exact in double
  MPI_CHECK(std::abs(r.value - rref) <= 1e-12 * rref);
  MPI_CHECK(m.grad.dtype() == DType::f32);
  MPI_CHECK(max_rel_diff(m.grad.gather_all(), mse_grad_ref(p, y)) < 1e-6);
  MPI_CHECK(max_rel_diff(r.grad.gather_all(), rel_grad_ref(p, y)) < 1e-6);
}

// Relative L2 and its gradient in long double (x86: 15 exponent bits), where squares of
// any float64 stay in range: the reference for targets whose squares leave float64.
std::pair<std::vector<long double>, std::vector<long double>> rel_long_double(const Tensor& p,
                                                                              const Tensor& y) {
  const Index N = p.shape(0), per = p.numel() / N;
  std::vector<long double> rel(static_cast<std::size_t>(N)), g(static_cast<std::size_t>(p.numel()));
  for (Index n = 0; n < N; ++n) {
    long double a = 0, b = 0;
    for (Index i = n * per; i < (n + 1) * per; ++i) {
      const long double d = static_cast<long double>(get(p, i)) - get(y, i);
      a += d * d;
      b += static_cast<long double>(get(y, i)) * get(y, i);
    }
    rel[static_cast<std::size_t>(n)] = std::sqrt(a / b);
    for (Index i = n * per; i < (n + 1) * per; ++i)
      g[static_cast<std::size_t>(i)] = (static_cast<long double>(get(p, i)) - get(y, i)) /
                                       (static_cast<long double>(N) * std::sqrt(a) * std::sqrt(b));
  }
  return {rel, g};
}

TEST_CASE("relative L2 of float64 targets whose squares leave float64", "[loss]") {
  static_assert(std::numeric_limits<long double>::max_exponent > 4000, "needs x86 long double");
  std::mt19937 rng(11);
  const Mesh mesh = Mesh::line(MPI_COMM_WORLD);
  const std::vector<Index> shape = {3, 2, 7, 5};
  const std::vector<Placement> dims = {Replicate(), Replicate(), Shard(0), Replicate()};
  const Tensor p0 = random_tensor(rng, shape), y0 = random_tensor(rng, shape);
  // (target scale, prediction scale, spread) per case: tiny both (1e-170: squares are
  // zero), huge both (1e200: squares are inf), a tiny target with an ordinary prediction (the
  // relative error is 1e170, its squares inf), a huge target with an ordinary prediction, a
  // tiny target with a huge prediction (the error 2^980), and a prediction whose every third
  // value is 2^-460 of the others (gradients 2^-460 apart within a sample).
  struct Scales {
    int ey, ep;
    bool spread;
  };
  const std::vector<Scales> cases = {{-565, -565, false}, {665, 665, false},  {-565, 0, false},
                                     {665, 0, false},     {-500, 480, false}, {-565, 0, true}};
  for (const auto& [ey, ep, spread] : cases) {
    Tensor p = p0.clone(), y = y0.clone();
    for (Index i = 0; i < p.numel(); ++i) {
      p.data<double>()[i] = std::ldexp(p.data<double>()[i], ep - (spread && i % 3 == 1 ? 460 : 0));
      y.data<double>()[i] = std::ldexp(y.data<double>()[i], ey);
    }
    // Sample 1 keeps ordinary values: it is summed once, as before.
    for (Index i = 70; i < 140; ++i) {
      p.data<double>()[i] = p0.data<double>()[i];
      y.data<double>()[i] = y0.data<double>()[i];
    }
    const auto [rel, gref] = rel_long_double(p, y);
    const long double want = (rel[0] + rel[1] + rel[2]) / 3;
    const LossResult r =
        relative_l2_loss(ShardTensor::scatter(mesh, p, dims), ShardTensor::scatter(mesh, y, dims));
    INFO("target 2^" << ey << ", prediction 2^" << ep << (spread ? ", spread" : ""));
    MPI_CHECK(std::isfinite(r.value));
    MPI_CHECK(std::abs(r.value - want) <= 1e-12L * want);
    const Tensor g = r.grad.gather_all();
    // Element by element (gradients of one sample may lie 2^460 apart): relative error.
    long double worst = 0;
    for (Index i = 0; i < g.numel(); ++i) {
      const long double want_i = gref[static_cast<std::size_t>(i)], got = g.data<double>()[i];
      worst =
          std::max(worst, want_i == 0 ? std::abs(got) : std::abs(got - want_i) / std::abs(want_i));
    }
    MPI_CHECK(worst < 1e-12L);
  }
}

TEST_CASE("loss errors are collective and say what is wrong", "[loss]") {
  const Mesh mesh = Mesh::line(MPI_COMM_WORLD);
  const std::vector<Placement> dims = {Replicate(), Replicate(), Shard(0)};
  Tensor y = test::reference({2, 1, 6}, DType::f64);
  for (Index i = 6; i < 12; ++i) y.data<double>()[i] = 0;  // sample 1 is all zero
  const ShardTensor ys = ShardTensor::scatter(mesh, y, dims);
  const ShardTensor ps =
      ShardTensor::scatter(mesh, test::reference({2, 1, 6}, DType::f64, 1), dims);
  MPI_CHECK_ERROR(relative_l2_loss(ps, ys), "the target of sample 1 of the batch has zero norm");
  // Validation leaves it out: the mean over sample 0 alone, and an all-zero batch counts none.
  Loss skip(LossKind::RelativeL2, {{}, true});
  const LossResult kept = skip(ps, ys, false),
                   only0 = relative_l2_loss(
                       ShardTensor::scatter(mesh, test::reference({1, 1, 6}, DType::f64, 1), dims),
                       ShardTensor::scatter(mesh, y.view(Box({0, 0, 0}, {1, 1, 6})).clone(), dims),
                       false);
  MPI_CHECK(kept.samples == 1);
  MPI_CHECK(std::abs(kept.value - only0.value) <= 1e-15 * only0.value);
  MPI_CHECK_ERROR(skip(ps, ys, true), "the target of sample 1 of the batch has zero norm");
  const ShardTensor zeros = ShardTensor::scatter(mesh, Tensor::zeros({2, 1, 6}, DType::f64), dims);
  const LossResult none = skip(ps, zeros, false);
  MPI_CHECK(none.samples == 0);
  MPI_CHECK(none.value == 0);
  const ShardTensor wrong =
      ShardTensor::scatter(mesh, test::reference({2, 1, 5}, DType::f64), dims);
  MPI_CHECK_ERROR(mse_loss(ps, wrong), "differ in global shape");
  const ShardTensor f32 = ShardTensor::scatter(mesh, test::reference({2, 1, 6}, DType::f32), dims);
  MPI_CHECK_ERROR(mse_loss(ps, f32), "differ in dtype");
  // A target sharded otherwise is redistributed: the same value and gradient.
  const ShardTensor other = ShardTensor::scatter(mesh, y, {Replicate(), Replicate(), Replicate()});
  const LossResult a = mse_loss(ps, ys), b = mse_loss(ps, other);
  MPI_CHECK(a.value == b.value);
  MPI_CHECK(b.grad.spec() == ps.spec());
  MPI_CHECK(test::same(a.grad.local(), b.grad.local()));
}
