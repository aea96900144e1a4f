// Point layers: IndexGather (rows by global index, and its adjoint) against direct indexing
// and by dot product; PointConv against a brute-force transcription of its definition (one
// rank), sharded == one rank forward and every gradient (float64 1e-11, float32 1e-5) for
// kNN and ball neighbourhoods, max and mean, balanced and uneven (empty) ranges, on a line and
// a data x points mesh; finite differences; errors.
#include <algorithm>
#include <cmath>
#include <random>

#include "runtime/comm/grad_sync.hpp"
#include "runtime/nn/ops_support.hpp"
#include "runtime/points/index_gather.hpp"
#include "runtime/points/point_conv.hpp"
#include "tests/harness/mpi_test.hpp"
#include "tests/support/layer_check.hpp"
#include "tests/support/point_conv_options.hpp"

using namespace tessera;

namespace {

int world_rank(MPI_Comm c) {
  int r = 0;
  MPI_Comm_rank(c, &r);
  return r;
}

PointConvOptions conv_options(DType dt, bool ball, bool mean) {
  return test::point_conv_options(dt, ball, mean, 1);  // a channel before x, y, z
}

// Features (N, 3, P) and a source (N, 4, P) whose channels 1..3 are coordinates in the unit
// cube, with a few duplicated points (ties broken by index).
std::pair<Tensor, Tensor> cloud(Index N, Index P, DType dt, unsigned seed) {
  Tensor f = test::random_tensor({N, 3, P}, dt, seed);
  Tensor s = test::random_tensor({N, 4, P}, dt, seed + 1, 0.0, 1.0);
  for (Index n = 0; n < N; ++n)
    for (Index i = 0; i + 7 < P; i += 7)
      for (Index c = 1; c < 4; ++c) {  // point i + 1 duplicates point i
        const Index a = (n * 4 + c) * P + i;
        if (dt == DType::f64)
          s.data<double>()[a + 1] = s.data<double>()[a];
        else
          s.data<float>()[a + 1] = s.data<float>()[a];
      }
  return {f, s};
}

// The layer's output on one rank written from the definition, with brute-force neighbours.
std::vector<double> naive(PointConv& layer, const PointConvOptions& o, const Tensor& f,
                          const Tensor& s) {
  const Index N = f.shape(0), C = f.shape(1), P = f.shape(2), O = o.out_channels;
  const Index k = o.neighbourhood.neighbours, E = C + 3;
  const auto w = param_values(layer.weight()), b = param_values(layer.bias());
  auto fv = [&](Index n, Index c, Index i) { return test::value_at(f, (n * C + c) * P + i); };
  auto xv = [&](Index n, Index c, Index i) { return test::value_at(s, (n * 4 + 1 + c) * P + i); };
  std::vector<double> y(static_cast<std::size_t>(N * O * P));
  for (Index n = 0; n < N; ++n)
    for (Index i = 0; i < P; ++i) {
      std::vector<std::pair<double, Index>> d;
      for (Index j = 0; j < P; ++j) {
        double r2 = 0;
        for (int c = 0; c < 3; ++c) r2 += (xv(n, c, j) - xv(n, c, i)) * (xv(n, c, j) - xv(n, c, i));
        if (o.neighbourhood.radius <= 0 || r2 <= o.neighbourhood.radius * o.neighbourhood.radius)
          d.push_back({r2, j});
      }
      std::sort(d.begin(), d.end());
      d.resize(std::min<std::size_t>(d.size(), static_cast<std::size_t>(k)));
      for (Index oc = 0; oc < O; ++oc) {
        double best = -INFINITY, sum = 0;
        for (const auto& [r2, j] : d) {
          double z = b[static_cast<std::size_t>(oc)];
          for (Index c = 0; c < C; ++c) z += w[static_cast<std::size_t>(oc * E + c)] * fv(n, c, j);
          for (int c = 0; c < 3; ++c)
            z += w[static_cast<std::size_t>(oc * E + C + c)] * (xv(n, c, j) - xv(n, c, i));
          const double h = 0.5 * z * (1.0 + std::erf(z / std::sqrt(2.0)));  // GELU
          best = std::max(best, h);
          sum += h;
        }
        y[static_cast<std::size_t>((n * O + oc) * P + i)] =
            d.empty() ? 0.0
            : o.mean  ? sum / static_cast<double>(d.size())
                      : best;
      }
    }
  return y;
}

}  // namespace

TEST_CASE("IndexGather fetches rows by global index and its adjoint sums them back") {
  MPI_Comm comm = test::harness_comm();
  int P = 1;
  MPI_Comm_size(comm, &P);
  const int me = world_rank(comm);
  std::mt19937 rng(4);
  for (bool uneven : {false, true}) {
    const Index total = 37;
    const std::vector<Index> sizes =
        uneven ? test::random_sizes(rng, total, P) : balanced_sizes(total, P);
    std::vector<Index> offsets{0};
    for (Index n : sizes) offsets.push_back(offsets.back() + n);
    const Tensor full = test::random_tensor({total, 2}, DType::f64, 8);
    const Index b = offsets[static_cast<std::size_t>(me)],
                e = offsets[static_cast<std::size_t>(me) + 1];
    const Tensor mine = full.view(Box({b, 0}, {e, 2})).contiguous();
    std::mt19937 per_rank(static_cast<unsigned>(11 + me));
    std::vector<std::int64_t> wanted;
    for (int i = 0; i < 23; ++i)
      wanted.push_back(static_cast<std::int64_t>(per_rank() % (total + 1)) - 1);  // -1 included
    const IndexGather g(comm, offsets, wanted);
    const Tensor got = g.forward(mine);
    bool exact = true;
    for (std::size_t i = 0; i < wanted.size(); ++i)
      for (Index c = 0; c < 2; ++c) {
        const double want = wanted[i] < 0 ? 0.0 : full.data<double>()[wanted[i] * 2 + c];
        exact = exact && got.data<double>()[static_cast<Index>(i) * 2 + c] == want;
      }
    MPI_CHECK(exact);
    // <G x, y> == <x, G* y>
    const Tensor y = test::random_tensor({static_cast<Index>(wanted.size()), 2}, DType::f64,
                                         static_cast<unsigned>(20 + me));
    const Tensor gty = g.adjoint(y);
    double lhs = 0, rhs = 0;
    for (Index i = 0; i < y.numel(); ++i) lhs += got.data<double>()[i] * y.data<double>()[i];
    for (Index i = 0; i < mine.numel(); ++i) rhs += mine.data<double>()[i] * gty.data<double>()[i];
    MPI_Allreduce(MPI_IN_PLACE, &lhs, 1, MPI_DOUBLE, MPI_SUM, comm);
    MPI_Allreduce(MPI_IN_PLACE, &rhs, 1, MPI_DOUBLE, MPI_SUM, comm);
    INFO("<Gx,y> " << lhs << " <x,G*y> " << rhs);
    MPI_CHECK(std::fabs(lhs - rhs) <= 1e-12 * std::fabs(lhs));
  }
}

TEST_CASE("PointConv equals its definition with brute-force neighbours on one rank") {
  const Mesh self(MPI_COMM_SELF, {1}, {"self"});
  for (bool ball : {false, true})
    for (bool mean : {false, true}) {
      const PointConvOptions o = conv_options(DType::f64, ball, mean);
      PointConv layer(o);
      const auto [f, s] = cloud(2, 60, DType::f64, 5);
      const Tensor y = layer
                           .forward({ShardTensor(self, ShardSpec::replicated(f.shape(), self), f),
                                     ShardTensor(self, ShardSpec::replicated(s.shape(), self), s)})
                           .local();
      const std::vector<double> want = naive(layer, o, f, s);
      double diff = 0, scale = 0;
      for (Index i = 0; i < y.numel(); ++i) {
        diff = std::max(diff, std::fabs(y.data<double>()[i] - want[static_cast<std::size_t>(i)]));
        scale = std::max(scale, std::fabs(want[static_cast<std::size_t>(i)]));
      }
      INFO((ball ? "ball " : "knn ") << (mean ? "mean" : "max") << " diff " << diff);
      MPI_CHECK(diff <= 1e-13 * scale);
    }
  // More neighbours than the cloud has points: every point is a neighbour (the lists hold
  // the cloud's 9 points, not 100000 slots of which all but 9 are empty).
  for (bool mean : {false, true}) {
    PointConvOptions o = conv_options(DType::f64, false, mean);
    o.neighbourhood.neighbours = 100000;
    PointConv layer(o);
    const auto [f, s] = cloud(2, 9, DType::f64, 7);
    reset_peak_memory(MemSpace::Host);
    const std::size_t before = memory_stats(MemSpace::Host).current;
    const ShardTensor y =
        layer.forward({ShardTensor(self, ShardSpec::replicated(f.shape(), self), f),
                       ShardTensor(self, ShardSpec::replicated(s.shape(), self), s)});
    const std::vector<double> want = naive(layer, o, f, s);
    double diff = 0;
    for (Index i = 0; i < y.local().numel(); ++i)
      diff = std::max(diff,
                      std::fabs(y.local().data<double>()[i] - want[static_cast<std::size_t>(i)]));
    MPI_CHECK(diff <= 1e-13);
    // 100000 slots per point would be over 40 MiB of edges alone.
    MPI_CHECK(memory_stats(MemSpace::Host).peak < before + (std::size_t{4} << 20));
  }
}

TEST_CASE("sharded PointConv equals one rank, forward and every gradient") {
  MPI_Comm comm = test::harness_comm();
  int P = 1;
  MPI_Comm_size(comm, &P);
  std::vector<std::pair<Mesh, int>> meshes{{Mesh::line(comm, "points"), 0}};
  if (P % 2 == 0 && P > 2) meshes.push_back({Mesh(comm, {2, P / 2}, {"data", "points"}), 1});
  std::mt19937 rng(9);
  const Mesh self(MPI_COMM_SELF, {1}, {"self"});
  for (const auto& [mesh, axis] : meshes)
    for (bool ball : {false, true})
      for (bool mean : {false, true})
        for (bool uneven : {false, true})
          for (DType dt : {DType::f64, DType::f32}) {
            const PointConvOptions o = conv_options(dt, ball, mean);
            const auto [f, s] = cloud(2, 45, dt, 13);
            PointConv one(o), many(o);
            const ShardTensor y1 =
                one.forward({ShardTensor(self, ShardSpec::replicated(f.shape(), self), f),
                             ShardTensor(self, ShardSpec::replicated(s.shape(), self), s)});
            const Tensor dy = test::random_tensor(y1.global_shape(), dt, 17);
            const Tensor dx1 =
                one.backward(ShardTensor(self, ShardSpec::replicated(dy.shape(), self), dy))[0]
                    .local();
            std::vector<std::vector<Index>> sizes(3);
            if (uneven) sizes[2] = test::random_sizes(rng, 45, mesh.dim(axis));
            std::vector<Placement> dims{Replicate(), Replicate(), Shard(axis)};
            if (mesh.ndim() == 2) dims[0] = Shard(0);
            const ShardSpec fs(f.shape(), dims, mesh, {}, sizes),
                ss(s.shape(), dims, mesh, {}, sizes);
            const ShardTensor yp = many.forward(
                {ShardTensor::scatter(mesh, f, fs), ShardTensor::scatter(mesh, s, ss)});
            const auto grads = many.backward(ShardTensor::scatter(mesh, dy, yp.spec()));
            sync_grads(mesh, many.parameters());
            const double tol = dt == DType::f64 ? 1e-11 : 1e-5;
            INFO(mesh.str() << " " << fs.str() << (ball ? " ball " : " knn ")
                            << (mean ? "mean " : "max ") << name_of(dt));
            MPI_CHECK(test::rel_error(yp.gather_all(), y1.local()) < tol);
            MPI_CHECK(test::rel_error(grads[0].gather_all(), dx1) < tol);
            MPI_CHECK(!grads[1].local().defined());
            MPI_CHECK(test::rel_error(many.weight().grad, one.weight().grad) < tol);
            MPI_CHECK(test::rel_error(many.bias().grad, one.bias().grad) < tol);
          }
}

TEST_CASE("PointConv gradients match finite differences") {
  const Mesh self(MPI_COMM_SELF, {1}, {"self"});
  for (bool mean : {false, true}) {
    PointConv layer(conv_options(DType::f64, false, mean));
    const auto [f, s] = cloud(1, 30, DType::f64, 21);
    const ShardTensor fx(self, ShardSpec::replicated(f.shape(), self), f),
        sx(self, ShardSpec::replicated(s.shape(), self), s);
    const ShardTensor y = layer.forward({fx, sx});
    const Tensor r = test::random_tensor(y.global_shape(), DType::f64, 2);
    const Tensor dx = layer.backward(ShardTensor(self, y.spec(), r))[0].local();
    auto loss = [&] {
      const Tensor yy = layer.forward({fx, sx}).local();
      double v = 0;
      for (Index i = 0; i < yy.numel(); ++i) v += yy.data<double>()[i] * r.data<double>()[i];
      return v;
    };
    const double h = 1e-6;
    double worst = 0, scale = 1e-300;
    for (Index i = 0; i < dx.numel(); ++i) scale = std::max(scale, std::fabs(dx.data<double>()[i]));
    for (Index i = 0; i < f.numel(); i += 7) {
      double& v = f.data<double>()[i];
      const double v0 = v;
      v = v0 + h;
      const double lp = loss();
      v = v0 - h;
      const double lm = loss();
      v = v0;
      worst = std::max(worst, std::fabs((lp - lm) / (2 * h) - dx.data<double>()[i]) / scale);
    }
    INFO((mean ? "mean" : "max") << ": worst relative error " << worst);
    MPI_CHECK(worst < 1e-6);
  }
}

TEST_CASE("PointConv refuses what it cannot take") {
  PointConvOptions o = conv_options(DType::f64, false, false);
  o.neighbourhood.neighbours = 0;
  MPI_CHECK(test::throws_with([&] { PointConv bad(o); }, "neighbours"));
  o = conv_options(DType::f64, false, false);
  PointConv layer(o);
  const Mesh self(MPI_COMM_SELF, {1}, {"self"});
  const ShardSpec f = ShardSpec::replicated({1, 3, 10}, self),
                  s = ShardSpec::replicated({1, 3, 10}, self);
  MPI_CHECK(test::throws_with([&] { layer.output_spec({f, s}); }, "coordinates are read"));
  const ShardSpec s2 = ShardSpec::replicated({1, 4, 11}, self);
  MPI_CHECK(test::throws_with([&] { layer.output_spec({f, s2}); }, "differ in dim 2"));
}
