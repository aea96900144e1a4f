// Neighbourhood attention: the window rule (exactly k keys per dim, in bounds, the query among
// them, centred away from the border); with the kernel as large as the grid it equals global
// multi-head attention with the same weights (an independent reference); sharded == one rank
// forward and every gradient (float64 1e-11, float32 1e-5) on 1-D, 2-D and 3-D grids, odd and
// even kernels, dilation 2, balanced and uneven shards thinner than the window (and empty),
// on line, 2-D and data x domain meshes; finite differences; errors.
#include <random>

#include "kernels/neighborhood_attention.hpp"
#include "runtime/attention/multi_head_attention.hpp"
#include "runtime/attention/neighborhood_attention.hpp"
#include "tests/harness/mpi_test.hpp"
#include "tests/support/layer_check.hpp"
#include "tests/support/attention_cases.hpp"

using namespace tessera;

namespace {

using Case = test::NeighborhoodCase;

NeighborhoodAttentionOptions options(const Case& c, DType dt) {
  return test::neighborhood_options(c, dt);
}

std::vector<Case> cases() {
  return test::neighborhood_cases();
}

}  // namespace

TEST_CASE("the neighbourhood window rule") {
  bool ok = true;
  for (Index n : {5, 8, 13})
    for (Index k : {1, 2, 3, 4, 5})
      for (Index dil : {1, 2})
        if (n / dil >= k)
          for (Index i = 0; i < n; ++i) {
            const Index s = kernels::neighborhood_start(i, n, k, dil);
            bool self = false;
            for (Index t = 0; t < k; ++t) {
              const Index j = s + t * dil;
              ok = ok && j >= 0 && j < n && j % dil == i % dil;
              self = self || j == i;
            }
            ok = ok && self;
            // Away from the border the window is centred: k / 2 class steps before.
            const Index ii = i / dil, n_r = (n - i % dil + dil - 1) / dil;
            if (ii >= k / 2 && ii - k / 2 + k <= n_r) ok = ok && s == i - (k / 2) * dil;
          }
  MPI_CHECK(ok);
}

TEST_CASE("neighbourhood attention over the whole grid equals global attention") {
  const Mesh self(MPI_COMM_SELF, {1}, {"self"});
  const std::vector<Index> shape{2, 4, 5, 6};
  NeighborhoodAttentionOptions o;
  o.nd = 2;
  o.channels = 4;
  o.heads = 2;
  o.kernel = {5, 6};
  o.dtype = DType::f64;
  o.seed = 9;
  MultiHeadAttentionOptions m;
  m.nd = 2;
  m.channels = 4;
  m.heads = 2;
  m.dtype = DType::f64;
  m.seed = 9;
  NeighborhoodAttention na(o);
  MultiHeadAttention global(m);
  const Tensor x = test::random_tensor(shape, DType::f64, 2);
  const ShardTensor xs(self, ShardSpec::replicated(shape, self), x);
  const Tensor a = na.forward(xs).local(), b = global.forward(xs).local();
  INFO("rel diff " << test::rel_error(a, b));
  MPI_CHECK(test::rel_error(a, b) < 1e-13);
}

TEST_CASE("sharded neighbourhood attention equals one rank, forward and every gradient") {
  MPI_Comm comm = test::harness_comm();
  int P = 1;
  MPI_Comm_size(comm, &P);
  std::vector<Mesh> meshes{Mesh::line(comm, "x")};
  if (P % 2 == 0 && P > 2) meshes.push_back(Mesh(comm, {2, P / 2}, {"x", "y"}));
  if (P % 2 == 0) meshes.push_back(Mesh(comm, {2, P / 2}, {"data", "x"}));
  std::mt19937 rng(6);
  for (const Mesh& mesh : meshes)
    for (const Case& c : cases())
      for (bool uneven : {false, true})
        for (DType dt : {DType::f64, DType::f32}) {
          const ShardSpec spec = test::conv_spec(mesh, c.shape, rng, uneven);
          const auto make = [&] { return std::make_unique<NeighborhoodAttention>(options(c, dt)); };
          const auto r = test::compare_with_one_rank(mesh, spec, make, dt, MemSpace::Host, 12);
          INFO(mesh.str() << " " << spec.str() << " " << name_of(dt) << ": " << r.str());
          MPI_CHECK(r.worst() < (dt == DType::f64 ? 1e-11 : 1e-5));
        }
}

TEST_CASE("neighbourhood attention gradients match finite differences") {
  const Mesh self(MPI_COMM_SELF, {1}, {"self"});
  for (const Case& c : cases()) {
    NeighborhoodAttention layer(options(c, DType::f64));
    const ShardTensor x(self, ShardSpec::replicated(c.shape, self),
                        test::random_tensor(c.shape, DType::f64, 3));
    const double err = test::finite_difference_error(layer, x, 5, 2, 1e-6);
    INFO(layer.name() << ": worst relative error " << err);
    MPI_CHECK(err < 1e-7);
  }
}

TEST_CASE("neighbourhood attention refuses grids smaller than its window") {
  const Mesh self(MPI_COMM_SELF, {1}, {"self"});
  NeighborhoodAttention layer(options({{1, 4, 13}, {5}, {3}}, DType::f64));
  MPI_CHECK(test::throws_with(
      [&] {
        layer.output_spec(ShardSpec::replicated({1, 4, 13}, self));
      },
      "a window of 5 keys at dilation 3 needs at least 15"));
  MPI_CHECK(test::throws_with(
      [&] {
        NeighborhoodAttention bad(options({{1, 4, 13}, {5, 5}, {1}}, DType::f64));
      },
      "kernel needs 1 or 1 values"));
}
