// Activation (ReLU, GELU, SiLU, tanh) and ChannelBias layers: sharded against one rank
// (forward, input gradient, bias gradient summed over the sharding axes) on every test
// mesh with even and uneven shards; naive float64 formulas; finite differences; errors.
#include <cmath>

#include "runtime/nn/pointwise_layers.hpp"
#include "tests/harness/mpi_test.hpp"
#include "tests/support/helpers.hpp"
#include "tests/support/ops_layer_check.hpp"

using namespace tessera;
namespace ops = tessera::test::ops;

namespace {
const Activation kAll[] = {Activation::ReLU, Activation::GELU, Activation::SiLU, Activation::Tanh};

double naive(Activation a, double x) {
  switch (a) {
    case Activation::ReLU:
      return x > 0 ? x : 0;
    case Activation::GELU:
      return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
    case Activation::SiLU:
      return x / (1 + std::exp(-x));
    case Activation::Tanh:
      return std::tanh(x);
  }
  return 0;
}

const std::vector<std::vector<Index>> kShapes{{2, 3, 7, 5}, {3, 4, 11}, {1, 2, 4, 3, 5}};
}  // namespace

TEST_CASE("Sharded activations and channel bias equal one rank, forward and backward",
          "[pointwise]") {
  const bool many = test::world_size() >= 8;
  std::mt19937 rng(3);
  int runs = 0;
  for (const auto& shape : kShapes) {
    const int ns = static_cast<int>(shape.size()) - 2;
    for (const Mesh& mesh : test::test_meshes(test::harness_comm())) {
      for (int layout = 0; layout < 2; ++layout) {
        for (DType dt : {DType::f64, DType::f32}) {
          if (many && dt == DType::f32) continue;
          const auto dims = ops::layer_dims(mesh, ns);
          const auto sizes = ops::layer_sizes(rng, mesh, shape, dims, layout > 0);
          const Tensor x = ops::random_tensor(shape, dt, 70 + runs, -3.0, 3.0);
          for (Activation a : kAll) {
            const auto e = ops::compare_with_single_rank(
                mesh, [&] { return std::make_unique<ActivationLayer>(a); }, x, dims, sizes);
            INFO(kernels::name_of(a)
                 << " on " << mesh.str() << " " << name_of(dt) << ": y " << e.y << " dx " << e.dx);
            MPI_CHECK(e.spec_ok);
            MPI_CHECK(e.worst() <= ops::tolerance(dt));
          }
          const Index C = shape[1];
          const auto e = ops::compare_with_single_rank(
              mesh, [&] { return std::make_unique<ChannelBias>(C, dt); }, x, dims, sizes, 7, 2);
          INFO("ChannelBias on " << mesh.str() << " " << name_of(dt) << ": y " << e.y << " dx "
                                 << e.dx << " db " << (e.grads.empty() ? -1 : e.grads[0]));
          MPI_CHECK(e.spec_ok);
          MPI_CHECK(e.grads.size() == 1);
          MPI_CHECK(e.worst() <= ops::tolerance(dt));
          ++runs;
        }
      }
    }
  }
  MPI_CHECK(runs > 0);
}

TEST_CASE("Activations match naive float64 formulas", "[pointwise]") {
  const Mesh mesh = Mesh::line(test::harness_comm());
  const std::vector<Index> shape{2, 3, 50};
  const Tensor x = ops::random_tensor(shape, DType::f64, 5, -6.0, 6.0);
  for (Activation a : kAll) {
    ActivationLayer l(a);
    const Tensor y =
        l.forward(ShardTensor::scatter(mesh, x, ops::layer_dims(mesh, 1))).gather_all();
    double err = 0;
    for (Index i = 0; i < x.numel(); ++i)
      err = std::max(err, std::abs(y.data<double>()[i] - naive(a, x.data<double>()[i])));
    INFO(kernels::name_of(a) << ": " << err);
    MPI_CHECK(err <= 1e-15);
  }
}

TEST_CASE("ChannelBias adds per channel and sums its gradient over every sharded axis",
          "[pointwise]") {
  for (const Mesh& mesh : test::test_meshes(test::harness_comm())) {
    const std::vector<Index> shape{2, 3, 6, 5};
    ChannelBias b(3, DType::f64);
    for (Index c = 0; c < 3; ++c) b.bias().value.at<double>({c}) = 10.0 * (c + 1);
    const Tensor x = ops::random_tensor(shape, DType::f64, 2);
    const auto dims = ops::layer_dims(mesh, 2);
    const Tensor y = b.forward(ShardTensor::scatter(mesh, x, dims)).gather_all();
    double err = 0;
    for (Index i = 0; i < x.numel(); ++i)
      err = std::max(
          err, std::abs(y.data<double>()[i] - x.data<double>()[i] - 10.0 * ((i / 30) % 3 + 1)));
    MPI_CHECK(err == 0);
    // dy = 1 everywhere: db[c] = N * H * W exactly, on every rank.
    Tensor ones = Tensor::empty(shape, DType::f64);
    for (Index i = 0; i < ones.numel(); ++i) ones.data<double>()[i] = 1;
    const ShardTensor dy = ShardTensor::scatter(mesh, ones, dims);
    b.backward(dy);
    b.backward(dy);  // accumulates
    sync_grads(mesh, b.parameters());
    bool ok = true;
    for (Index c = 0; c < 3; ++c) ok = ok && b.bias().grad.at<double>({c}) == 2.0 * 60;
    MPI_CHECK(ok);
    // Before the sum each rank keeps its own part; their sum is the gradient.
    ChannelBias local(3, DType::f64);
    local.forward(ShardTensor::scatter(mesh, x, dims));
    local.backward(dy);
    std::vector<double> g(3);
    for (Index c = 0; c < 3; ++c) g[c] = local.bias().grad.at<double>({c});
    MPI_Allreduce(MPI_IN_PLACE, g.data(), 3, MPI_DOUBLE, MPI_SUM, test::harness_comm());
    int replicas = 1;  // ranks along axes that do not shard the input hold copies
    for (int a = 0; a < mesh.ndim(); ++a) {
      bool used = false;
      for (const Placement& p : dims) used = used || p.axis == a;
      if (!used) replicas *= mesh.dim(a);
    }
    MPI_CHECK(g[0] == 60.0 * replicas && g[1] == 60.0 * replicas && g[2] == 60.0 * replicas);
  }
}

TEST_CASE("Pointwise gradients match finite differences (float64, one rank)", "[pointwise]") {
  const Tensor x = ops::random_tensor({2, 3, 5, 4}, DType::f64, 80, -3.0, 3.0);
  for (Activation a : kAll) {
    const double err =
        ops::finite_difference_error([&] { return std::make_unique<ActivationLayer>(a); }, x);
    INFO(kernels::name_of(a) << ": " << err);
    MPI_CHECK(err <= 1e-7);
  }
  const double err =
      ops::finite_difference_error([&] { return std::make_unique<ChannelBias>(3, DType::f64); }, x);
  MPI_CHECK(err <= 1e-7);
}

TEST_CASE("Pointwise layers reject bad parameters and inputs with clear errors", "[pointwise]") {
  using ops::throws_error;
  MPI_CHECK(throws_error([] { ChannelBias b(0); }));
  MPI_CHECK(throws_error([] { ChannelBias b(3, DType::i64); }));
  const Mesh mesh = Mesh::line(test::harness_comm());
  ChannelBias b(3, DType::f64);
  const Tensor x4 = ops::random_tensor({1, 4, 6}, DType::f64, 1);
  MPI_CHECK(throws_error([&] {
    b.forward(ShardTensor::scatter(mesh, x4, {Replicate(), Replicate(), Shard(0)}));
  }));
  const Tensor x32 = ops::random_tensor({1, 3, 6}, DType::f32, 1);
  MPI_CHECK(throws_error([&] {
    b.forward(ShardTensor::scatter(mesh, x32, {Replicate(), Replicate(), Shard(0)}));
  }));
  MPI_CHECK(throws_error([&] { b.backward(ShardTensor()); }));
  ActivationLayer r(Activation::ReLU);
  MPI_CHECK(throws_error([&] { r.backward(ShardTensor()); }));
  MPI_CHECK(throws_error([&] {
    r.output_spec(ShardSpec({4, 4}, {Replicate(), Replicate()}, mesh, {0}));
  }));
  const Tensor xi = Tensor::zeros({1, 3, 6}, DType::i64);
  MPI_CHECK(throws_error([&] {
    r.forward(ShardTensor::scatter(mesh, xi, {Replicate(), Replicate(), Shard(0)}));
  }));
}
