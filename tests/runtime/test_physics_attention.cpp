// Transolver's physics attention: against a naive float64 transcription of the formulas
// (one rank), sharded == one rank forward and every gradient (float64 1e-11, float32 1e-5) on
// point clouds (one token dim) and grids (two token dims), balanced and uneven shards with
// empty ranks, on a 1-D mesh, a 2-D mesh and a domain x data mesh; finite differences; errors.
#include <cmath>
#include <random>

#include "kernels/device/device.hpp"
#include "runtime/attention/physics_attention.hpp"
#include "runtime/nn/ops_support.hpp"
#include "tests/harness/mpi_test.hpp"
#include "tests/support/attention_cases.hpp"
#include "tests/support/layer_check.hpp"

using namespace tessera;

namespace {

PhysicsAttentionOptions options(int nd, DType dt) {
  return test::physics_options(nd, dt);
}

// The layer's output for x (N, C, P) written out from the definition in float64.
std::vector<double> naive(PhysicsAttention& layer, const Tensor& x) {
  const auto& o = layer.options();
  const Index N = x.shape(0), C = x.shape(1), P = x.numel() / (N * C);
  const Index H = o.heads, D = o.head_dim, M = o.slices, HD = H * D;
  const auto ps = layer.parameters();
  const auto win = param_values(*ps[0]), bin = param_values(*ps[1]), ws = param_values(*ps[2]),
             bs = param_values(*ps[3]), tau = param_values(*ps[4]), wq = param_values(*ps[5]),
             wk = param_values(*ps[6]), wv = param_values(*ps[7]), wout = param_values(*ps[8]),
             bout = param_values(*ps[9]);
  auto xv = [&](Index n, Index c, Index p) { return test::value_at(x, (n * C + c) * P + p); };
  std::vector<double> y(static_cast<std::size_t>(N * C * P));
  for (Index n = 0; n < N; ++n) {
    // in-projection: hm[j][p], j < 2 H D
    std::vector<std::vector<double>> hm(2 * HD, std::vector<double>(P));
    for (Index j = 0; j < 2 * HD; ++j)
      for (Index p = 0; p < P; ++p) {
        double s = bin[j];
        for (Index c = 0; c < C; ++c) s += win[j * C + c] * xv(n, c, p);
        hm[j][p] = s;
      }
    std::vector<std::vector<double>> mid(HD, std::vector<double>(P, 0.0));
    for (Index h = 0; h < H; ++h) {
      std::vector<std::vector<double>> w(M, std::vector<double>(P));
      for (Index p = 0; p < P; ++p) {
        double mx = -INFINITY, sum = 0;
        for (Index m = 0; m < M; ++m) {
          double l = bs[m];
          for (Index d = 0; d < D; ++d) l += ws[m * D + d] * hm[h * D + d][p];
          w[m][p] = l / tau[h];
          mx = std::max(mx, w[m][p]);
        }
        for (Index m = 0; m < M; ++m) sum += (w[m][p] = std::exp(w[m][p] - mx));
        for (Index m = 0; m < M; ++m) w[m][p] /= sum;
      }
      std::vector<std::vector<double>> T(M, std::vector<double>(D)), q = T, k = T, v = T, O = T;
      for (Index m = 0; m < M; ++m) {
        double z = 0;
        for (Index p = 0; p < P; ++p) z += w[m][p];
        for (Index d = 0; d < D; ++d) {
          double a = 0;
          for (Index p = 0; p < P; ++p) a += w[m][p] * hm[HD + h * D + d][p];
          T[m][d] = a / (z + o.eps);
        }
      }
      for (Index m = 0; m < M; ++m)
        for (Index i = 0; i < D; ++i)
          for (Index j = 0; j < D; ++j) {
            q[m][i] += T[m][j] * wq[i * D + j];
            k[m][i] += T[m][j] * wk[i * D + j];
            v[m][i] += T[m][j] * wv[i * D + j];
          }
      for (Index m = 0; m < M; ++m) {
        std::vector<double> s(M);
        double mx = -INFINITY, sum = 0;
        for (Index j = 0; j < M; ++j) {
          for (Index d = 0; d < D; ++d) s[j] += q[m][d] * k[j][d];
          s[j] /= std::sqrt(static_cast<double>(D));
          mx = std::max(mx, s[j]);
        }
        for (Index j = 0; j < M; ++j) sum += (s[j] = std::exp(s[j] - mx));
        for (Index j = 0; j < M; ++j)
          for (Index d = 0; d < D; ++d) O[m][d] += s[j] / sum * v[j][d];
      }
      for (Index d = 0; d < D; ++d)
        for (Index p = 0; p < P; ++p)
          for (Index m = 0; m < M; ++m) mid[h * D + d][p] += w[m][p] * O[m][d];
    }
    for (Index c = 0; c < C; ++c)
      for (Index p = 0; p < P; ++p) {
        double s = bout[c];
        for (Index j = 0; j < HD; ++j) s += wout[c * HD + j] * mid[j][p];
        y[static_cast<std::size_t>((n * C + c) * P + p)] = s;
      }
  }
  return y;
}

}  // namespace

TEST_CASE("physics attention equals its definition on one rank") {
  const Mesh self(MPI_COMM_SELF, {1}, {"self"});
  for (int nd : {1, 2}) {
    PhysicsAttention layer(options(nd, DType::f64));
    const std::vector<Index> shape =
        nd == 1 ? std::vector<Index>{2, 3, 300} : std::vector<Index>{2, 3, 17, 19};
    const Tensor x = test::random_tensor(shape, DType::f64, 5);
    const Tensor y =
        layer.forward(ShardTensor(self, ShardSpec::replicated(shape, self), x)).local();
    const std::vector<double> want = naive(layer, x);
    double diff = 0, scale = 0;
    for (Index i = 0; i < y.numel(); ++i) {
      diff = std::max(diff, std::fabs(y.data<double>()[i] - want[static_cast<std::size_t>(i)]));
      scale = std::max(scale, std::fabs(want[static_cast<std::size_t>(i)]));
    }
    INFO("nd " << nd << " diff " << diff << " scale " << scale);
    MPI_CHECK(diff < 1e-13 * scale);
  }
}

TEST_CASE("sharded physics attention equals one rank, forward and every gradient") {
  MPI_Comm comm = test::harness_comm();
  int P = 1;
  MPI_Comm_size(comm, &P);
  std::vector<Mesh> meshes{Mesh::line(comm, "points")};
  if (P % 2 == 0 && P > 2) meshes.push_back(Mesh(comm, {2, P / 2}, {"data", "points"}));
  if (P == 4) meshes.push_back(Mesh(comm, {2, 2}, {"x", "y"}));
  std::mt19937 rng(7);
  for (const Mesh& mesh : meshes)
    for (int nd : {1, 2})
      for (bool uneven : {false, true})
        for (DType dt : {DType::f64, DType::f32}) {
          const std::vector<Index> shape =
              nd == 1 ? std::vector<Index>{2, 3, 41} : std::vector<Index>{2, 3, 9, 7};
          const ShardSpec spec = test::conv_spec(mesh, shape, rng, uneven);
          const auto make = [&] { return std::make_unique<PhysicsAttention>(options(nd, dt)); };
          const auto c = test::compare_with_one_rank(mesh, spec, make, dt, MemSpace::Host, 21 + nd);
          INFO(mesh.str() << " " << spec.str() << " " << name_of(dt) << ": " << c.str());
          MPI_CHECK(c.worst() < (dt == DType::f64 ? 1e-11 : 1e-5));
        }
}

TEST_CASE("physics attention gradients match finite differences") {
  const Mesh self(MPI_COMM_SELF, {1}, {"self"});
  PhysicsAttention layer(options(1, DType::f64));
  const std::vector<Index> shape{2, 3, 23};
  const ShardTensor x(self, ShardSpec::replicated(shape, self),
                      test::random_tensor(shape, DType::f64, 9));
  const double err = test::finite_difference_error(layer, x, 6, 3, 1e-6);
  INFO("worst relative error " << err);
  MPI_CHECK(err < 1e-7);
}

TEST_CASE("physics attention refuses what it cannot take") {
  const Mesh self(MPI_COMM_SELF, {1}, {"self"});
  PhysicsAttentionOptions o = options(1, DType::f64);
  PhysicsAttention layer(o);
  const std::vector<Index> wrong_c{1, 4, 10};
  MPI_CHECK(test::throws_with(
      [&] {
        layer.forward(ShardTensor(self, ShardSpec::replicated(wrong_c, self),
                                  Tensor::zeros(wrong_c, DType::f64)));
      },
      "channels"));
  const std::vector<Index> f32{1, 3, 10};
  MPI_CHECK(test::throws_with(
      [&] {
        layer.forward(
            ShardTensor(self, ShardSpec::replicated(f32, self), Tensor::zeros(f32, DType::f32)));
      },
      "float32"));
  MPI_CHECK(test::throws_with([&] { layer.backward({}); }, "backward before forward"));
  {  // a temperature an update took below zero: the head and the remedy said
    PhysicsAttention hot(options(1, DType::f64));
    hot.parameters()[4]->value.data<double>()[1] = -0.5;
    const std::vector<Index> shape{1, 3, 10};
    MPI_CHECK(test::throws_with(
        [&] {
          hot.forward(ShardTensor(self, ShardSpec::replicated(shape, self),
                                  test::random_tensor(shape, DType::f64, 3)));
        },
        "the learned temperature of head 1 is -0.5, not positive (the slice softmax divides by "
        "it): an update drove it there; a smaller optim.lr or an optim.grad_clip keeps it "
        "positive"));
  }
  o.slices = 0;
  MPI_CHECK(test::throws_with([&] { PhysicsAttention bad(o); }, ">= 1"));
  o = options(1, DType::f32);
  o.space = MemSpace::Cuda;
  if (device::count() == 0)  // CUDA tensors without a device: a clear error, not a crash
    MPI_CHECK(test::throws_with([&] { PhysicsAttention bad(o); }, "CUDA"));
}
