#pragma once
// The layout sweep the pooling and upsampling tests share: every case on every test mesh,
// balanced, aligned and uneven shards, float64 and float32, against the single-rank layer.
#include <algorithm>
#include <memory>
#include <random>
#include <vector>

#include "tests/harness/mpi_test.hpp"
#include "tests/support/helpers.hpp"
#include "tests/support/ops_layer_check.hpp"

namespace tessera::test::ops {

struct SweepResult {
  int runs = 0;
  double worst = 0;
};

// Each Case has `what`, `opts` (with a `split`) and `shape`; spatial(opts) is its number of
// spatial dims and make(opts) builds the layer. x is drawn with seed `seed0 + run`. On 8 or
// more ranks only float64 and two layouts run, to bound the time.
template <class Case, class Spatial, class Make>
SweepResult sweep_layouts(const std::vector<Case>& cases, std::mt19937& rng, int seed0,
                          Spatial spatial, Make make) {
  const bool many = world_size() >= 8;
  SweepResult r;
  for (const Case& c : cases) {
    const int ns = spatial(c.opts);
    for (const Mesh& mesh : test_meshes(harness_comm())) {
      for (int layout = 0; layout < (many ? 2 : 3); ++layout) {
        for (DType dt : {DType::f64, DType::f32}) {
          if (many && dt == DType::f32) continue;
          const auto dims = layer_dims(mesh, ns);
          const auto sizes = layer_sizes(rng, mesh, c.shape, dims, layout > 0);
          const Tensor x = random_tensor(c.shape, dt, seed0 + r.runs);
          auto o = c.opts;
          o.split = layout == 1 ? OutputSplit::Aligned : OutputSplit::Balanced;
          const auto e = compare_with_single_rank(
              mesh, [&] { return make(o); }, x, dims, sizes);
          INFO(c.what << " on " << mesh.str() << " layout " << layout << " " << name_of(dt)
                      << ": y " << e.y << " dx " << e.dx);
          MPI_CHECK(e.spec_ok);
          MPI_CHECK(e.worst() <= tolerance(dt));
          r.worst = std::max(r.worst, e.worst());
          ++r.runs;
        }
      }
    }
  }
  return r;
}

}  // namespace tessera::test::ops
