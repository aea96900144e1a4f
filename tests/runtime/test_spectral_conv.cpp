// The sharded spectral convolution (FNO's Fourier layer) against the same layer on one
// rank: forward and the gradients of input and weights, float64 to 1e-11 and float32 to
// 1e-5, 1-D, 2-D and 3-D, on slab, pencil and domain x data meshes, balanced and uneven
// shards; a finite-difference check on one rank; the reference FNO's weight layout (the
// two corners of modes) against a direct evaluation of the truncated Fourier series. Weights
// replicated and sharded by mode (dfno): each rank holds its block, no gradient reduced over
// the domain, checkpoints whole, a load at another decomposition.
#include <cmath>
#include <complex>

#include "runtime/comm/grad_sync.hpp"
#include "runtime/nn/parameter_shard.hpp"
#include "runtime/spectral/spectral_conv.hpp"
#include "runtime/train/optim.hpp"
#include "tests/harness/mpi_test.hpp"
#include "tests/support/layer_check.hpp"

using namespace tessera;
using cd = std::complex<double>;

namespace {

struct Case {
  std::vector<Index> shape;
  std::vector<Index> modes;
  Index cout;
};

const std::vector<Case> kCases = {
    {{2, 3, 16}, {5}, 2},            // 1-D
    {{2, 2, 12, 9}, {3, 4}, 3},      // 2-D, odd real dim
    {{3, 2, 7, 10}, {2, 5}, 2},      // 2-D, prime dim, all real bins but one
    {{1, 2, 6, 8, 5}, {2, 3, 2}, 2}  // 3-D
};

}  // namespace

TEST_CASE("sharded SpectralConv equals one rank, forward and backward") {
  std::mt19937 rng(5);
  for (const Case& c : kCases)
    for (const Mesh& mesh : test::spatial_meshes(test::harness_comm()))
      for (bool uneven : {false, true})
        for (DType dt : {DType::f64, DType::f32})
          for (bool mode_sharded : {false, true}) {
            if (dt == DType::f32 && uneven) continue;
            const ShardSpec spec = test::conv_spec(mesh, c.shape, rng, uneven);
            SpectralConvOptions o;
            o.nd = static_cast<int>(c.shape.size()) - 2;
            o.in_channels = c.shape[1];
            o.out_channels = c.cout;
            o.modes = c.modes;
            o.dtype = dt;
            o.seed = 3;
            o.shard_weights = mode_sharded;
            SpectralConvOptions serial = o;
            serial.shard_weights = false;
            const auto r = test::compare_with_one_rank(
                mesh, spec, [&] { return std::make_unique<SpectralConv>(o); }, dt, MemSpace::Host,
                11, [&] { return std::make_unique<SpectralConv>(serial); });
            INFO(mesh.str() << " " << spec.str() << " " << name_of(dt)
                            << (mode_sharded ? " mode-sharded" : "") << ": " << r.str());
            MPI_CHECK(r.worst() <= (dt == DType::f64 ? 1e-11 : 1e-5));
          }
}

TEST_CASE("SpectralConv's gradients match finite differences on one rank") {
  const Mesh self(MPI_COMM_SELF, {1}, {"self"});
  for (const Case& c : kCases) {
    SpectralConvOptions o;
    o.nd = static_cast<int>(c.shape.size()) - 2;
    o.in_channels = c.shape[1];
    o.out_channels = c.cout;
    o.modes = c.modes;
    o.dtype = DType::f64;
    SpectralConv layer(o);
    const Tensor x = test::random_tensor(c.shape, DType::f64, 2);
    const ShardTensor xs(self, ShardSpec::replicated(c.shape, self), x);
    const double err = test::finite_difference_error(layer, xs, 12, 4);
    INFO(layer.name() << ": " << err);
    MPI_CHECK(err < 1e-8);
  }
}

TEST_CASE("the layer is the truncated Fourier series with the reference FNO's corners") {
  // 1 channel in and out, 2-D: y = irfft2( W . rfft2(x) ) with W nonzero at one mode of the
  // high corner only: y must be the real cosine of that mode.
  const Mesh self(MPI_COMM_SELF, {1}, {"self"});
  SpectralConvOptions o;
  o.nd = 2;
  o.modes = {2, 2};
  o.dtype = DType::f64;
  SpectralConv layer(o);
  const Tensor w = layer.weight().value;  // (1, 1, 4, 2, 2): kx kept as 0, 1, -2, -1
  w.zero();
  w.at<double>({0, 0, 3, 1, 0}) = 1.0;  // kx = -1, ky = 1, real weight 1
  const Index nx = 8, ny = 6;
  Tensor x = Tensor::empty({1, 1, nx, ny}, DType::f64);
  const double pi = std::acos(-1.0);
  for (Index i = 0; i < nx; ++i)
    for (Index j = 0; j < ny; ++j)  // the mode (-1, 1) and one the layer drops, (3, 0)
      x.at<double>({0, 0, i, j}) =
          std::cos(2 * pi * (-1.0 * i / nx + 1.0 * j / ny)) + std::cos(2 * pi * 3.0 * i / nx);
  const ShardTensor y = layer.forward(ShardTensor(self, ShardSpec::replicated(x.shape(), self), x));
  double err = 0;
  for (Index i = 0; i < nx; ++i)
    for (Index j = 0; j < ny; ++j)
      err = std::max(err, std::abs(y.local().at<double>({0, 0, i, j}) -
                                   std::cos(2 * pi * (-1.0 * i / nx + 1.0 * j / ny))));
  MPI_CHECK(err < 1e-12);
}

TEST_CASE("SpectralConv refuses grids too small for its modes and sharded channels") {
  const Mesh line = Mesh::line(test::harness_comm());
  SpectralConvOptions o;
  o.nd = 2;
  o.in_channels = 2;
  o.modes = {4, 4};
  o.dtype = DType::f64;
  SpectralConv layer(o);
  const std::vector<Index> small{1, 2, 6, 8};
  const Tensor x = test::random_tensor(small, DType::f64, 1);
  MPI_CHECK(test::throws_with(
      [&] {
        layer.forward(
            ShardTensor::scatter(line, x, {Replicate(), Replicate(), Shard(0), Replicate()}));
      },
      "need at least 8 points"));
  if (line.size() > 1) {
    const std::vector<Index> shape{1, 2, 8, 8};
    const Tensor x2 = test::random_tensor(shape, DType::f64, 1);
    MPI_CHECK(test::throws_with(
        [&] {
          layer.forward(
              ShardTensor::scatter(line, x2, {Replicate(), Shard(0), Replicate(), Replicate()}));
        },
        "whole channels"));
  }
}

TEST_CASE("mode-sharded weights: blocks, no domain reduction, whole checkpoints") {
  const MPI_Comm comm = test::harness_comm();
  int P = 1;
  MPI_Comm_size(comm, &P);
  std::vector<Mesh> ms = {Mesh::line(comm, "x")};
  if (P % 2 == 0) ms.push_back(Mesh(comm, {P / 2, 2}, {"x", "data"}));
  for (const Mesh& mesh : ms) {
    const std::vector<Index> shape{2, 3, 12, 10};
    std::mt19937 rng(9);
    const ShardSpec spec = test::conv_spec(mesh, shape, rng, true);
    SpectralConvOptions o;
    o.nd = 2;
    o.in_channels = 3;
    o.out_channels = 2;
    o.modes = {3, 4};
    o.dtype = DType::f64;
    o.seed = 7;
    o.shard_weights = true;
    SpectralConv replicated([&] {
      SpectralConvOptions r = o;
      r.shard_weights = false;
      return r;
    }());
    const Tensor whole = replicated.weight().value.clone();
    SpectralConv layer(o);
    // Unbound: no trainer may take it yet.
    MPI_CHECK(!layout_problem(layer.weight()).empty());
    MPI_CHECK(test::throws_with([&] { GradSync g(mesh, {&layer.weight()}, {}); }, "no layout yet"));
    layer.bind(mesh, spec);
    const Parameter& w = layer.weight();
    MPI_CHECK(w.shard != nullptr);
    MPI_CHECK(global_shape(w) == whole.shape());
    // The blocks tile the weights over the domain axis: their sizes add up to the whole.
    long long mine = w.value.numel(), total = 0;
    MPI_Allreduce(&mine, &total, 1, MPI_LONG_LONG, MPI_SUM, mesh.axis_comm(0));
    MPI_CHECK(total == whole.numel());
    MPI_CHECK(test::rel_error(gather_global(w, w.value), whole) == 0);
    // A step: the weight gradient is reduced over the data axis only (nothing on a line).
    const Tensor x = test::random_tensor(shape, DType::f64, 3);
    const ShardTensor y = layer.forward(ShardTensor::scatter(mesh, x, spec));
    layer.backward(
        ShardTensor::scatter(mesh, test::random_tensor(y.global_shape(), DType::f64, 4), y.spec()));
    std::vector<Parameter*> ps = {&layer.weight()};
    GradSync sync(mesh, ps, {});
    sync.sync();
    MPI_CHECK(sync.stats().allreduces == (mesh.ndim() == 2 ? 1 : 0));
    // The global gradient norm counts every block once.
    const Tensor g = gather_global(w, w.grad);
    double ss = 0;
    for (Index i = 0; i < g.numel(); ++i) ss += g.data<double>()[i] * g.data<double>()[i];
    const double norm = grad_norm({{"w", &layer.weight()}});
    MPI_CHECK(std::abs(norm - std::sqrt(ss)) <= 1e-13 * std::sqrt(ss));
    // Checkpoint whole, load into the layer at another decomposition (here: replicated input),
    // which takes its own blocks.
    const Tensor saved = gather_global(w, w.value);
    SpectralConv other(o);
    MPI_CHECK(!other.weight().value.defined());  // allocated when laid out, its block only
    MPI_CHECK(global_shape(other.weight()) == whole.shape());
    other.bind(mesh, ShardSpec::replicated(shape, mesh));
    other.weight().value.zero();
    other.weight().value.copy_from(local_block(other.weight(), saved));
    MPI_CHECK(test::rel_error(gather_global(other.weight(), other.weight().value), saved) == 0);
    // Binding the layer again to a decomposition with other blocks is refused on every rank.
    if (mesh.dim(0) > 1)
      MPI_CHECK(test::throws_with([&] { layer.bind(mesh, ShardSpec::replicated(shape, mesh)); },
                                  "another decomposition"));
  }
}
