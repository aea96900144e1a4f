// Multi-head self-attention among the tokens of a sharded grid: against a naive float64
// transcription (one rank), sharded == one rank forward and every gradient (float64 1e-11,
// float32 1e-5) with ring, all-to-all, all-gather and automatic choice, tokens sharded over
// one axis, over two (one ring of all ranks) and with the batch over a data axis, balanced and
// uneven; finite differences; errors.
#include <cmath>
#include <random>

#include "runtime/attention/multi_head_attention.hpp"
#include "runtime/nn/ops_support.hpp"
#include "tests/harness/mpi_test.hpp"
#include "tests/support/layer_check.hpp"

using namespace tessera;

namespace {

MultiHeadAttentionOptions options(DType dt, SequenceAlgorithm a) {
  MultiHeadAttentionOptions o;
  o.nd = 2;
  o.channels = 6;
  o.heads = 2;
  o.algorithm = a;
  o.dtype = dt;
  o.seed = 5;
  return o;
}

std::vector<double> naive(MultiHeadAttention& layer, const Tensor& x, Index H) {
  const Index N = x.shape(0), C = x.shape(1), T = x.numel() / (N * C), D = C / H;
  const auto ps = layer.parameters();
  const auto wqkv = param_values(*ps[0]), bqkv = param_values(*ps[1]), wo = param_values(*ps[2]),
             bo = param_values(*ps[3]);
  std::vector<double> y(static_cast<std::size_t>(N * C * T));
  for (Index n = 0; n < N; ++n) {
    std::vector<std::vector<double>> h(3 * C, std::vector<double>(T));
    for (Index j = 0; j < 3 * C; ++j)
      for (Index t = 0; t < T; ++t) {
        double s = bqkv[j];
        for (Index c = 0; c < C; ++c) s += wqkv[j * C + c] * test::value_at(x, (n * C + c) * T + t);
        h[j][t] = s;
      }
    std::vector<std::vector<double>> mid(C, std::vector<double>(T, 0.0));
    for (Index hd = 0; hd < H; ++hd)
      for (Index t = 0; t < T; ++t) {
        std::vector<double> sc(T);
        double mx = -INFINITY, sum = 0;
        for (Index u = 0; u < T; ++u) {
          for (Index d = 0; d < D; ++d) sc[u] += h[hd * D + d][t] * h[C + hd * D + d][u];
          sc[u] /= std::sqrt(static_cast<double>(D));
          mx = std::max(mx, sc[u]);
        }
        for (Index u = 0; u < T; ++u) sum += (sc[u] = std::exp(sc[u] - mx));
        for (Index d = 0; d < D; ++d)
          for (Index u = 0; u < T; ++u)
            mid[hd * D + d][t] += sc[u] / sum * h[2 * C + hd * D + d][u];
      }
    for (Index c = 0; c < C; ++c)
      for (Index t = 0; t < T; ++t) {
        double s = bo[c];
        for (Index j = 0; j < C; ++j) s += wo[c * C + j] * mid[j][t];
        y[static_cast<std::size_t>((n * C + c) * T + t)] = s;
      }
  }
  return y;
}

}  // namespace

TEST_CASE("multi-head attention equals its definition on one rank") {
  const Mesh self(MPI_COMM_SELF, {1}, {"self"});
  MultiHeadAttention layer(options(DType::f64, SequenceAlgorithm::Auto));
  const std::vector<Index> shape{2, 6, 5, 7};
  const Tensor x = test::random_tensor(shape, DType::f64, 3);
  const Tensor y = layer.forward(ShardTensor(self, ShardSpec::replicated(shape, self), x)).local();
  const auto want = naive(layer, x, 2);
  double diff = 0, scale = 0;
  for (Index i = 0; i < y.numel(); ++i) {
    diff = std::max(diff, std::fabs(y.data<double>()[i] - want[static_cast<std::size_t>(i)]));
    scale = std::max(scale, std::fabs(want[static_cast<std::size_t>(i)]));
  }
  INFO("diff " << diff);
  MPI_CHECK(diff <= 1e-13 * scale);
}

TEST_CASE("sharded multi-head attention equals one rank, forward and every gradient") {
  MPI_Comm comm = test::harness_comm();
  int P = 1;
  MPI_Comm_size(comm, &P);
  std::vector<Mesh> meshes{Mesh::line(comm, "x")};
  if (P % 2 == 0 && P > 2) meshes.push_back(Mesh(comm, {2, P / 2}, {"x", "y"}));
  if (P % 2 == 0) meshes.push_back(Mesh(comm, {2, P / 2}, {"data", "x"}));
  std::mt19937 rng(8);
  for (const Mesh& mesh : meshes)
    for (auto algo : {SequenceAlgorithm::Ring, SequenceAlgorithm::AllToAll,
                      SequenceAlgorithm::AllGather, SequenceAlgorithm::Auto})
      for (bool uneven : {false, true})
        for (DType dt : {DType::f64, DType::f32}) {
          const std::vector<Index> shape{2, 6, 7, 5};
          const ShardSpec spec = test::conv_spec(mesh, shape, rng, uneven);
          const auto make = [&] { return std::make_unique<MultiHeadAttention>(options(dt, algo)); };
          const auto c = test::compare_with_one_rank(mesh, spec, make, dt, MemSpace::Host, 31);
          INFO(mesh.str() << " " << spec.str() << " " << name_of(algo) << " " << name_of(dt) << ": "
                          << c.str());
          MPI_CHECK(c.worst() < (dt == DType::f64 ? 1e-11 : 1e-5));
        }
}

TEST_CASE("multi-head attention gradients match finite differences") {
  const Mesh self(MPI_COMM_SELF, {1}, {"self"});
  MultiHeadAttention layer(options(DType::f64, SequenceAlgorithm::Auto));
  const std::vector<Index> shape{1, 6, 4, 5};
  const ShardTensor x(self, ShardSpec::replicated(shape, self),
                      test::random_tensor(shape, DType::f64, 4));
  const double err = test::finite_difference_error(layer, x, 6, 2, 1e-6);
  INFO("worst relative error " << err);
  MPI_CHECK(err < 1e-7);
}

TEST_CASE("multi-head attention refuses heads that do not divide the channels") {
  MultiHeadAttentionOptions o = options(DType::f64, SequenceAlgorithm::Auto);
  o.heads = 4;
  MPI_CHECK(test::throws_with([&] { MultiHeadAttention bad(o); }, "heads must divide"));
}
