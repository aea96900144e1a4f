// The distributed kNN and ball queries with their local search on a CUDA device against the
// host's (identical lists), and PointConv with its parameters, neighbourhood search and edge
// convolution on the device against the same layer on the host (same mesh, same shards):
// forward, the features' gradient and the parameter gradients, kNN and ball
// neighbourhoods, max and mean, float32 and float64. Skips, saying so, without a device.
#include <algorithm>
#include <cstring>
#include <random>

#include "runtime/comm/grad_sync.hpp"
#include "runtime/points/migration.hpp"
#include "runtime/points/neighbor_query.hpp"
#include "runtime/points/point_conv.hpp"
#include "runtime/points/spatial_layout.hpp"
#include "tests/harness/mpi_test.hpp"
#include "tests/support/have_device.hpp"
#include "tests/support/layer_check.hpp"
#include "tests/support/point_conv_options.hpp"

using namespace tessera;

namespace {
struct Run {
  Tensor y, dx, dw, db;
};

// Identical lists: the same ids and the same squared distances, bit for bit (+inf padding).
bool same(const NeighborLists& a, const NeighborLists& b) {
  const Index n = a.ids.numel();
  return n == b.ids.numel() &&
         std::equal(a.ids.data<std::int64_t>(), a.ids.data<std::int64_t>() + n,
                    b.ids.data<std::int64_t>()) &&
         std::memcmp(a.d2.data<double>(), b.d2.data<double>(), static_cast<std::size_t>(n) * 8) ==
             0;
}

Run run(const Mesh& mesh, const PointConvOptions& base, MemSpace space, const Tensor& f,
        const Tensor& s) {
  PointConvOptions o = base;
  o.space = space;
  PointConv layer(o);
  const std::vector<Placement> dims{Replicate(), Replicate(), Shard(0)};
  const ShardTensor y = layer.forward({ShardTensor::scatter(mesh, f.to(space), dims),
                                       ShardTensor::scatter(mesh, s.to(space), dims)});
  const Tensor dy = test::random_tensor(y.global_shape(), f.dtype(), 17);
  const auto g = layer.backward(ShardTensor::scatter(mesh, dy.to(space), y.spec()));
  sync_grads(mesh, layer.parameters());
  return {y.gather_all().to(MemSpace::Host), g[0].gather_all().to(MemSpace::Host),
          layer.weight().grad.to(MemSpace::Host), layer.bias().grad.to(MemSpace::Host)};
}
}  // namespace

TEST_CASE("PointConv on CUDA tensors equals the host path", "[gpu]") {
  if (!test::have_device()) return;
  const Mesh mesh = Mesh::line(test::harness_comm(), "points");
  for (DType dt : {DType::f64, DType::f32})
    for (bool ball : {false, true})
      for (bool mean : {false, true}) {
        const PointConvOptions o = test::point_conv_options(dt, ball, mean, 0);
        const Tensor f = test::random_tensor({2, 3, 41}, dt, 5);
        const Tensor s = test::random_tensor({2, 3, 41}, dt, 6, 0.0, 1.0);
        const Run d = run(mesh, o, MemSpace::Cuda, f, s), h = run(mesh, o, MemSpace::Host, f, s);
        const double tol = dt == DType::f64 ? 1e-11 : 1e-5;
        INFO((ball ? "ball " : "knn ") << (mean ? "mean " : "max ") << name_of(dt));
        MPI_CHECK(test::rel_error(d.y, h.y) < tol);
        MPI_CHECK(test::rel_error(d.dx, h.dx) < tol);
        MPI_CHECK(test::rel_error(d.dw, h.dw) < tol);
        MPI_CHECK(test::rel_error(d.db, h.db) < tol);
      }
}

TEST_CASE("Distributed queries searching on the device equal the host's", "[gpu]") {
  if (!test::have_device()) return;
  MPI_Comm comm = test::harness_comm();
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  std::mt19937 rng(31 + static_cast<unsigned>(rank));
  std::uniform_real_distribution<double> u(0, 1);
  const Index n = 2000;
  Tensor xyz = Tensor::empty({n, 3}, DType::f64), ids = Tensor::empty({n}, DType::i64);
  for (Index i = 0; i < n; ++i) {
    for (int c = 0; c < 3; ++c) xyz.data<double>()[3 * i + c] = u(rng);
    if (i % 10 == 9)  // duplicates: ties broken by id
      for (int c = 0; c < 3; ++c) xyz.data<double>()[3 * i + c] = xyz.data<double>()[3 * i - 3 + c];
    ids.data<std::int64_t>()[i] = rank * n + i;
  }
  const SpatialLayout layout = SpatialLayout::rcb(comm, xyz);
  const Migration mig(comm, layout.owners(xyz));
  const Tensor owned = mig.forward(xyz), owned_ids = mig.forward(ids);
  for (Index k : {1, 16}) {
    const NeighborLists h = knn_query(comm, layout, owned, owned_ids, xyz, k, MemSpace::Host);
    const NeighborLists d = knn_query(comm, layout, owned, owned_ids, xyz, k, MemSpace::Cuda);
    INFO("kNN k " << k);
    MPI_CHECK(same(d, h));
  }
  for (double r : {0.0, 0.08}) {
    const NeighborLists h = ball_query(comm, layout, owned, owned_ids, xyz, r, 24, MemSpace::Host);
    const NeighborLists d = ball_query(comm, layout, owned, owned_ids, xyz, r, 24, MemSpace::Cuda);
    INFO("ball r " << r);
    MPI_CHECK(same(d, h));
  }
}
