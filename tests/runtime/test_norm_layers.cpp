// Sharded GroupNorm, BatchNorm (training and eval, running statistics) and channel
// LayerNorm against the same layers on one rank, forward and the gradients of input,
// gamma and beta, on 1-D, 2-D and 3-D meshes (N, C and spatial dims sharded), even and
// uneven shards; a naive long-double reference; a large-offset input that a one-pass
// variance would fail; finite differences; errors.
#include <cmath>

#include "runtime/nn/norm_layers.hpp"
#include "tests/harness/mpi_test.hpp"
#include "tests/support/expect_error.hpp"
#include "tests/support/helpers.hpp"
#include "tests/support/ops_layer_check.hpp"

using namespace tessera;
namespace ops = tessera::test::ops;

namespace {
enum class Which { Group, Batch, BatchEval, Layer };

struct Case {
  std::string what;
  Which which;
  Index groups;
  std::vector<Index> shape;
};

std::vector<Case> cases() {
  return {
      {"GroupNorm 2d G=3", Which::Group, 3, {2, 6, 7, 5}},
      {"GroupNorm 2d G=1 (layer norm over C and space)", Which::Group, 1, {2, 4, 5, 6}},
      {"GroupNorm 2d G=C (instance norm)", Which::Group, 4, {2, 4, 5, 6}},
      {"GroupNorm 1d G=2", Which::Group, 2, {3, 4, 11}},
      {"GroupNorm 3d G=2", Which::Group, 2, {1, 4, 5, 4, 3}},
      {"BatchNorm 2d", Which::Batch, 1, {4, 3, 6, 5}},
      {"BatchNorm 1d", Which::Batch, 1, {5, 2, 9}},
      {"BatchNorm 3d", Which::Batch, 1, {2, 3, 4, 3, 5}},
      {"BatchNorm 2d eval", Which::BatchEval, 1, {4, 3, 6, 5}},
      {"ChannelLayerNorm 2d", Which::Layer, 1, {2, 5, 6, 4}},
      {"ChannelLayerNorm 1d", Which::Layer, 1, {3, 6, 10}},
      {"ChannelLayerNorm 3d", Which::Layer, 1, {1, 4, 3, 4, 5}},
  };
}

std::unique_ptr<Layer> make_norm(const Case& c, DType dt) {
  NormOptions o;
  o.dtype = dt;
  o.eps = 1e-3;
  const Index C = c.shape[1];
  switch (c.which) {
    case Which::Group:
      return std::make_unique<GroupNorm>(c.groups, C, o);
    case Which::Batch:
      return std::make_unique<BatchNorm>(C, o);
    case Which::BatchEval: {
      auto b = std::make_unique<BatchNorm>(C, o);
      std::vector<double> m(C), v(C);
      for (Index i = 0; i < C; ++i) {
        m[i] = 0.1 * static_cast<double>(i) - 0.2;
        v[i] = 0.5 + 0.25 * static_cast<double>(i);
      }
      b->set_running_stats(m, v);
      b->train(false);
      return b;
    }
    case Which::Layer:
      return std::make_unique<ChannelLayerNorm>(C, o);
  }
  return nullptr;
}

// Sharded placements for a norm case; a GroupNorm's channel shards hold whole groups.
std::vector<std::vector<Index>> norm_sizes(std::mt19937& rng, const Mesh& mesh, const Case& c,
                                           const std::vector<Placement>& dims, bool uneven) {
  auto sizes = ops::layer_sizes(rng, mesh, c.shape, dims, uneven);
  if (c.which == Which::Group && dims[1].sharded()) {
    const Index per = c.shape[1] / c.groups;
    std::vector<Index> s(mesh.dim(dims[1].axis), 0);
    for (Index g = 0; g < c.groups; ++g) s[uneven ? rng() % s.size() : g % s.size()] += per;
    sizes[1] = s;
  }
  return sizes;
}

// Independent reference: GroupNorm forward in long double (gamma = 1, beta = 0).
Tensor naive_group_norm(const Tensor& x, Index groups, double eps) {
  const Index N = x.shape(0), C = x.shape(1), S = x.numel() / (N * C), per = C / groups;
  Tensor y = Tensor::empty(x.shape(), DType::f64);
  const double* xp = x.data<double>();
  for (Index n = 0; n < N; ++n)
    for (Index g = 0; g < groups; ++g) {
      const Index base = (n * C + g * per) * S, M = per * S;
      long double mean = 0, var = 0;
      for (Index i = 0; i < M; ++i) mean += xp[base + i];
      mean /= M;
      for (Index i = 0; i < M; ++i) var += (xp[base + i] - mean) * (xp[base + i] - mean);
      var /= M;
      const long double r = 1.0L / std::sqrt(var + eps);
      for (Index i = 0; i < M; ++i)
        y.data<double>()[base + i] = static_cast<double>((xp[base + i] - mean) * r);
    }
  return y;
}
}  // namespace

TEST_CASE("Sharded norms equal single-rank norms, forward and every gradient", "[norm]") {
  const bool many = test::world_size() >= 8;
  std::mt19937 rng(13);
  int runs = 0;
  for (const Case& c : cases()) {
    const int ns = static_cast<int>(c.shape.size()) - 2;
    for (const Mesh& mesh : test::test_meshes(test::harness_comm())) {
      for (int layout = 0; layout < (many ? 2 : 3); ++layout) {
        for (DType dt : {DType::f64, DType::f32}) {
          if (many && dt == DType::f32) continue;
          auto dims = ops::layer_dims(mesh, ns);
          // On 1-D meshes, shard C instead of space on the third layout (LayerNorm reduces
          // over it, GroupNorm and BatchNorm keep whole channels per rank).
          if (layout == 2 && mesh.ndim() == 1) {
            dims.assign(dims.size(), Replicate());
            dims[1] = Shard(0);
          }
          const auto sizes = norm_sizes(rng, mesh, c, dims, layout > 0);
          const Tensor x = ops::random_tensor(c.shape, dt, 31 + runs, -1.0, 2.0);
          const auto e = ops::compare_with_single_rank(
              mesh, [&] { return make_norm(c, dt); }, x, dims, sizes, 7, 2);
          INFO(c.what << " on " << mesh.str() << " layout " << layout << " " << name_of(dt)
                      << ": y " << e.y << " dx " << e.dx << " dgamma "
                      << (e.grads.size() > 0 ? e.grads[0] : -1) << " dbeta "
                      << (e.grads.size() > 1 ? e.grads[1] : -1));
          MPI_CHECK(e.spec_ok);
          MPI_CHECK(e.grads.size() == 2);
          MPI_CHECK(e.worst() <= ops::tolerance(dt));
          ++runs;
        }
      }
    }
  }
  MPI_CHECK(runs > 0);
}

TEST_CASE("BatchNorm running statistics agree across layouts and drive eval mode", "[norm]") {
  for (const Mesh& mesh : test::test_meshes(test::harness_comm())) {
    const std::vector<Index> shape{4, 3, 5, 6};
    NormOptions o;
    o.dtype = DType::f64;
    o.momentum = 0.3;
    BatchNorm ref(3, o), sh(3, o);
    const Mesh self = Mesh::line(MPI_COMM_SELF);
    const auto dims = ops::layer_dims(mesh, 2);
    std::vector<Tensor> xs;
    for (int step = 0; step < 3; ++step) {
      const Tensor x = ops::random_tensor(shape, DType::f64, 40 + step, -1.0 + step, 3.0);
      ref.forward(ShardTensor::scatter(self, x, ShardSpec::replicated(shape, self)));
      sh.forward(ShardTensor::scatter(mesh, x, dims));
      xs.push_back(x);
    }
    // Independent: running stats from the batch statistics of each step, in long double.
    std::vector<double> m(3, 0.0), v(3, 1.0);
    const Index S = 30, M = 4 * S;
    for (const Tensor& x : xs)
      for (Index c = 0; c < 3; ++c) {
        long double mean = 0, var = 0;
        for (Index n = 0; n < 4; ++n)
          for (Index i = 0; i < S; ++i) mean += x.data<double>()[(n * 3 + c) * S + i];
        mean /= M;
        for (Index n = 0; n < 4; ++n)
          for (Index i = 0; i < S; ++i) {
            const long double d = x.data<double>()[(n * 3 + c) * S + i] - mean;
            var += d * d;
          }
        m[c] = 0.7 * m[c] + 0.3 * static_cast<double>(mean);
        v[c] = 0.7 * v[c] + 0.3 * static_cast<double>(var / (M - 1));
      }
    double err = 0;
    for (int c = 0; c < 3; ++c) {
      err = std::max(err, std::abs(sh.running_mean()[c] - m[c]) / std::abs(m[c]));
      err = std::max(err, std::abs(sh.running_var()[c] - v[c]) / v[c]);
      err = std::max(err, std::abs(ref.running_mean()[c] - m[c]) / std::abs(m[c]));
    }
    INFO(mesh.str() << ": running stats error " << err);
    MPI_CHECK(err <= 1e-13);
    // Eval mode uses them: y = (x - m) / sqrt(v + eps) with gamma 1, beta 0.
    sh.train(false);
    const Tensor y = sh.forward(ShardTensor::scatter(mesh, xs[0], dims)).gather_all();
    double yerr = 0;
    for (Index i = 0; i < y.numel(); ++i) {
      const Index c = (i / S) % 3;
      const double want = (xs[0].data<double>()[i] - m[c]) / std::sqrt(v[c] + o.eps);
      yerr = std::max(yerr, std::abs(y.data<double>()[i] - want));
    }
    MPI_CHECK(yerr <= 1e-12);
  }
}

TEST_CASE("GroupNorm matches a long-double reference, also with a large offset", "[norm]") {
  // Offset 1e4 with unit spread: a one-pass E[x^2] - mean^2 in double loses ~8 digits
  // here; the two-pass statistics keep the sharded and reference results within 1e-12.
  for (const Mesh& mesh : test::test_meshes(test::harness_comm())) {
    for (double offset : {0.0, 1e4}) {
      const std::vector<Index> shape{2, 4, 9, 8};
      const Tensor x = ops::random_tensor(shape, DType::f64, 50, offset - 1, offset + 1);
      NormOptions o;
      o.dtype = DType::f64;
      o.affine = false;
      GroupNorm gn(2, 4, o);
      const Tensor y =
          gn.forward(ShardTensor::scatter(mesh, x, ops::layer_dims(mesh, 2))).gather_all();
      const double err = ops::rel_error(y, naive_group_norm(x, 2, o.eps));
      INFO(mesh.str() << " offset " << offset << ": " << err);
      MPI_CHECK(err <= (offset == 0 ? 1e-14 : 1e-11));
      MPI_CHECK(gn.parameters().empty());
    }
  }
}

TEST_CASE("Norm gradients match finite differences (float64, one rank)", "[norm]") {
  for (const Case& c : cases()) {
    const Tensor x = ops::random_tensor(c.shape, DType::f64, 60, -1.0, 2.0);
    const double err =
        ops::finite_difference_error([&] { return make_norm(c, DType::f64); }, x, 16, 1e-5);
    INFO(c.what << ": " << err);
    MPI_CHECK(err <= 1e-7);
  }
}

TEST_CASE("Norms reject bad parameters and inputs with clear errors", "[norm]") {
  using ops::throws_error;
  NormOptions o;
  MPI_CHECK(throws_error([&] { GroupNorm g(3, 4, o); }));  // 3 groups, 4 channels
  MPI_CHECK(throws_error([&] { GroupNorm g(0, 4, o); }));
  MPI_CHECK(throws_error([&] { BatchNorm b(0, o); }));
  NormOptions bad = o;
  bad.eps = -1;
  MPI_CHECK(throws_error([&] { ChannelLayerNorm l(4, bad); }));
  bad = o;
  bad.momentum = 1.5;
  MPI_CHECK(throws_error([&] { BatchNorm b(4, bad); }));
  bad = o;
  bad.dtype = DType::i64;
  MPI_CHECK(throws_error([&] { BatchNorm b(4, bad); }));
  BatchNorm b(2, o);
  MPI_CHECK(throws_error([&] { b.set_running_stats({0, 0}, {1, -1}); }));
  MPI_CHECK(throws_error([&] { b.set_running_stats({0}, {1}); }));

  const Mesh mesh = Mesh::line(test::harness_comm());
  GroupNorm g(2, 4, o);
  MPI_CHECK(throws_error([&] {  // channel count
    g.output_spec(ShardSpec({1, 6, 8}, {Replicate(), Replicate(), Shard(0)}, mesh));
  }));
  MPI_CHECK(throws_error([&] { g.output_spec(ShardSpec({4}, {Shard(0)}, mesh)); }));
  if (mesh.size() >= 2) {  // channel shards of 1 and 3 split the groups of 2
    std::vector<Index> cs(mesh.size(), 0);
    cs[0] = 1;
    cs[1] = 3;
    MPI_CHECK(throws_error([&] {
      g.output_spec(
          ShardSpec({1, 4, 8}, {Replicate(), Shard(0), Replicate()}, mesh, {}, {{}, cs, {}}));
    }));
  }
  const Tensor x64 = ops::random_tensor({1, 4, 8}, DType::f64, 1);  // layer is float32
  MPI_CHECK(throws_error([&] {
    g.forward(ShardTensor::scatter(mesh, x64, {Replicate(), Replicate(), Shard(0)}));
  }));
  MPI_CHECK(throws_error([&] { g.backward(ShardTensor()); }));
  // Training-mode BatchNorm over one value per channel (batch 1, a 1x1 grid, the grid dim
  // sharded: some ranks empty) is refused on every rank; in eval mode it runs.
  BatchNorm single(4, o);
  const Tensor one = ops::random_tensor({1, 4, 1}, DType::f32, 2);
  const ShardTensor xs = ShardTensor::scatter(mesh, one, {Replicate(), Replicate(), Shard(0)});
  MPI_CHECK_ERROR(single.forward(xs), "batch statistics of one value per channel");
  single.train(false);
  MPI_CHECK(xs.local().numel() == single.forward(xs).local().numel());
}
