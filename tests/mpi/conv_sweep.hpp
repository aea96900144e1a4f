#pragma once
// The sweep the conv and transposed-conv tests share: each case on every test mesh, sharded
// evenly and unevenly, against the same layer on one rank.
#include <random>
#include <string>
#include <vector>

#include "tests/harness/mpi_test.hpp"
#include "tests/mpi/helpers.hpp"
#include "tests/mpi/layer_check.hpp"

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

}  // namespace tessera::test
