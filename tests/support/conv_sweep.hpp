#pragma once
// The checks the conv and transposed-conv tests share: each case on every test mesh, sharded
// evenly and unevenly, against the same layer on one rank; one rank against a naive
// reference and against finite differences.
#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "tests/harness/mpi_test.hpp"
#include "tests/support/helpers.hpp"
#include "tests/support/layer_check.hpp"

namespace tessera::test {

// Each Case has `label`, options `o` and input `shape`. Run k of the sweep alternates the
// output split and drops the bias every fifth run; vary(o, k) sets the layer's own options
// and returns their note for the message; make(o) builds the layer. The input of run k is
// drawn with seed `seed0 + k`.
template <class Case, class Vary, class Make>
void sweep_conv_cases(const std::vector<Case>& cases, DType dt, double tol, int trials_per_mesh,
                      unsigned rng_seed, unsigned seed0, Vary vary, Make make) {
  std::mt19937 rng(rng_seed);
  int checked = 0;
  for (const Mesh& mesh : test_meshes(MPI_COMM_WORLD)) {
    for (const Case& c : cases) {
      for (int t = 0; t < trials_per_mesh; ++t) {
        auto o = c.o;
        o.dtype = dt;
        o.split = (t + checked) % 2 ? OutputSplit::Aligned : OutputSplit::Balanced;
        o.bias = (t + checked) % 5 != 4;
        const std::string note = vary(o, t + checked);
        const ShardSpec spec = conv_spec(mesh, c.shape, rng, t % 2 == 1);
        const auto cmp = compare_with_one_rank(
            mesh, spec, [&] { return make(o); }, dt, MemSpace::Host, seed0 + checked);
        INFO(c.label << " " << name_of(dt) << " mesh " << mesh.str() << " spec " << spec.str()
                     << (o.split == OutputSplit::Aligned ? " aligned" : " balanced") << note << ": "
                     << cmp.str());
        MPI_CHECK(cmp.worst() <= tol);
        ++checked;
      }
    }
  }
  MPI_REQUIRE(checked > 0);
}

// The cases of `all` at `ids`.
template <class Case>
std::vector<Case> subset(const std::vector<Case>& all, const std::vector<int>& ids) {
  std::vector<Case> s;
  for (int i : ids) s.push_back(all.at(static_cast<std::size_t>(i)));
  return s;
}

// Each case's float64 Layer on one rank against naive(c, x, weight, bias), input seed 5.
template <class Layer, class Case, class Naive>
void check_one_rank_naive(const std::vector<Case>& cases, Naive naive) {
  int checked = 0;
  for (const Case& c : cases) {
    auto o = c.o;
    o.dtype = DType::f64;
    Layer layer(o);
    const Mesh self(MPI_COMM_SELF, {1}, {"self"});
    const Tensor x = random_tensor(c.shape, DType::f64, 5);
    const ShardTensor y = layer.forward(ShardTensor(self, ShardSpec::replicated(c.shape, self), x));
    const Tensor want = naive(c, x, layer.weight().value, layer.bias()->value);
    INFO(c.label << " " << layer.name());
    MPI_CHECK(rel_error(y.local(), want) <= 1e-13);
    ++checked;
  }
  MPI_REQUIRE(checked > 0);
}

// Each case's float64 Layer on one rank against finite differences (input seed 9).
template <class Layer, class Case>
void check_finite_differences(const std::vector<Case>& cases, unsigned fd_seed) {
  const Mesh self(MPI_COMM_SELF, {1}, {"self"});
  double worst = 0;
  for (const Case& c : cases) {
    auto o = c.o;
    o.dtype = DType::f64;
    Layer layer(o);
    const Tensor x = random_tensor(c.shape, DType::f64, 9);
    const ShardTensor xs(self, ShardSpec::replicated(c.shape, self), x);
    const double e = finite_difference_error(layer, xs, 12, fd_seed);
    INFO(c.label << ": " << e);
    CHECK(e <= 1e-8);
    worst = std::max(worst, e);
  }
  MPI_REQUIRE(worst <= 1e-8);
}

}  // namespace tessera::test
