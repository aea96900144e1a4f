// Learned position embeddings sharded with the tokens: on the table's own grid each rank
// holds its tokens' block of the table and the layer equals one rank, forward and gradients
// (float64 1e-11, float32 1e-5), on 1-D, 2-D and 3-D grids, slab, pencil and domain x data
// meshes, uneven shards (empty ones included); on a larger grid the whole table is
// interpolated and equals one rank too; the interpolation against hand values, finite
// differences of every gradient on one rank; the table's gradient is not reduced over the
// domain; a table sharded for one decomposition refuses another.
#include "runtime/comm/grad_sync.hpp"
#include "runtime/nn/learned_positions.hpp"
#include "runtime/nn/parameter_shard.hpp"
#include "tests/harness/mpi_test.hpp"
#include "tests/support/layer_check.hpp"

using namespace tessera;

namespace {

LearnedPositionsOptions options(const std::vector<Index>& grid, Index channels, DType dt) {
  LearnedPositionsOptions o;
  o.nd = static_cast<int>(grid.size());
  o.channels = channels;
  o.grid = grid;
  o.dtype = dt;
  o.seed = 5;
  return o;
}

struct Case {
  std::vector<Index> table, input;  // token grids
};

}  // namespace

TEST_CASE("learned positions sharded with the tokens equal one rank") {
  std::mt19937 rng(3);
  const std::vector<Case> cases = {{{9}, {9}},  {{6, 5}, {6, 5}}, {{4, 3, 5}, {4, 3, 5}},
                                   {{5}, {13}}, {{3, 4}, {7, 9}}, {{4, 4}, {4, 4}}};
  for (const Case& c : cases)
    for (const Mesh& mesh : test::spatial_meshes(test::harness_comm()))
      for (bool uneven : {false, true})
        for (DType dt : {DType::f64, DType::f32}) {
          if (dt == DType::f32 && uneven) continue;
          std::vector<Index> shape = {2, 3};
          shape.insert(shape.end(), c.input.begin(), c.input.end());
          const ShardSpec spec = test::conv_spec(mesh, shape, rng, uneven);
          const auto o = options(c.table, 3, dt);
          const auto r = test::compare_with_one_rank(
              mesh, spec, [&] { return std::make_unique<LearnedPositions>(o); }, dt, MemSpace::Host,
              17);
          INFO(mesh.str() << " " << spec.str() << " table " << shape_str(c.table) << " "
                          << name_of(dt) << ": " << r.str());
          MPI_CHECK(r.worst() <= (dt == DType::f64 ? 1e-11 : 1e-5));
        }
}

TEST_CASE("the table is interpolated at normalized positions, gradients by its transpose") {
  const Mesh self(MPI_COMM_SELF, {1}, {"self"});
  // A table of 3 entries on a grid of 5 tokens: u = 0, .25, .5, .75, 1 -> entries 0, .5, 1,
  // 1.5, 2.
  LearnedPositions layer(options({3}, 1, DType::f64));
  const std::vector<Index> shape{1, 1, 5};
  const ShardTensor x(self, ShardSpec::replicated(shape, self), Tensor::zeros(shape, DType::f64));
  MPI_CHECK(!layer.table().value.defined());  // allocated when laid out
  layer.bind(self, x.spec());
  const Tensor t = layer.table().value;
  t.data<double>()[0] = 1;
  t.data<double>()[1] = 10;
  t.data<double>()[2] = 100;
  const Tensor y = layer.forward(x).local();
  const double want[5] = {1, 5.5, 10, 55, 100};
  double err = 0;
  for (int i = 0; i < 5; ++i) err = std::max(err, std::abs(y.data<double>()[i] - want[i]));
  MPI_CHECK(err < 1e-13);
  // Finite differences of every gradient (the layer is linear: central differences exact),
  // on the table's grid and off it, 1-D to 3-D.
  for (const Case& c : std::vector<Case>{{{4}, {7}}, {{3, 4}, {5, 4}}, {{2, 3, 2}, {3, 5, 2}}}) {
    LearnedPositions l(options(c.table, 2, DType::f64));
    std::vector<Index> s = {2, 2};
    s.insert(s.end(), c.input.begin(), c.input.end());
    const ShardTensor xs(self, ShardSpec::replicated(s, self),
                         test::random_tensor(s, DType::f64, 4));
    const double e = test::finite_difference_error(l, xs, 10, 6);
    INFO(l.name() << " on " << shape_str(s) << ": " << e);
    MPI_CHECK(e < 1e-9);
  }
}

TEST_CASE("a sharded table: blocks, no domain reduction, whole checkpoints, one layout") {
  for (const Mesh& mesh : test::spatial_meshes(test::harness_comm())) {
    const std::vector<Index> shape{2, 4, 7, 6};
    std::mt19937 rng(11);
    const ShardSpec spec = test::conv_spec(mesh, shape, rng, true);
    LearnedPositions whole(options({7, 6}, 4, DType::f64));
    LearnedPositions layer(options({7, 6}, 4, DType::f64));
    MPI_CHECK(test::throws_with([&] { GradSync g(mesh, {&layer.table()}, {}); }, "no layout yet"));
    layer.bind(mesh, spec);
    const Parameter& t = layer.table();
    MPI_CHECK(t.shard != nullptr);
    // The blocks made from the seed equal the whole table made from it (unbound: no value held).
    MPI_CHECK(!whole.table().value.defined());
    MPI_CHECK(test::rel_error(gather_global(t, t.value),
                              gather_global(whole.table(), whole.table().value)) == 0);
    const ShardTensor y =
        layer.forward(ShardTensor::scatter(mesh, test::random_tensor(shape, DType::f64, 1), spec));
    layer.backward(ShardTensor::scatter(mesh, test::random_tensor(shape, DType::f64, 2), spec));
    GradSync sync(mesh, {&layer.table()}, {});
    sync.sync();
    const bool data = mesh.names().back() == "data";
    // (A rank whose block is empty, and its data-axis partner with the same block, skip it.)
    MPI_CHECK(sync.stats().allreduces == (data && mesh.dim(1) > 1 && t.value.numel() > 0 ? 1 : 0));
    if (mesh.dim(0) > 1)
      MPI_CHECK(test::throws_with([&] { layer.bind(mesh, ShardSpec::replicated(shape, mesh)); },
                                  "another decomposition"));
    (void)y;
  }
}
