// Sharded nearest and linear upsampling (x2, x3, mixed factors; 1-D, 2-D, 3-D; corners
// aligned or not) against
// single-rank upsampling, forward and input gradient, on 1-D, 2-D and 3-D meshes with even
// and uneven shards; naive float64 reference; adjoint identity; finite differences; errors.
#include <cmath>

#include "runtime/nn/upsample_layer.hpp"
#include "tests/harness/mpi_test.hpp"
#include "tests/support/helpers.hpp"
#include "tests/support/layer_check.hpp"
#include "tests/support/layer_sweep.hpp"
#include "tests/support/ops_layer_check.hpp"

using namespace tessera;
namespace ops = tessera::test::ops;
using Mode = UpsampleOptions::Mode;

namespace {
UpsampleOptions up(Mode m, std::vector<Index> scale, OutputSplit split = OutputSplit::Balanced,
                   bool align_corners = false) {
  UpsampleOptions o;
  o.mode = m;
  o.align_corners = align_corners;
  o.scale = std::move(scale);
  o.split = split;
  return o;
}

struct Case {
  std::string what;
  UpsampleOptions opts;
  std::vector<Index> shape;
};

// The three kinds: nearest, linear, linear with aligned corners.
struct Kind {
  Mode mode;
  bool align;
  std::string name;
};
const std::vector<Kind> kinds{{Mode::Nearest, false, "nearest"},
                              {Mode::Linear, false, "linear"},
                              {Mode::Linear, true, "linear aligned"}};

std::vector<Case> cases() {
  std::vector<Case> v;
  const OutputSplit bal = OutputSplit::Balanced;
  for (const Kind& k : kinds) {
    const Mode m = k.mode;
    const std::string& mn = k.name;
    for (Index s : {2, 3}) {
      const std::string sn = " x" + std::to_string(s);
      v.push_back({mn + " 1d" + sn, up(m, {s}, bal, k.align), {2, 2, 7}});
      v.push_back({mn + " 2d" + sn, up(m, {s, s}, bal, k.align), {1, 2, 5, 4}});
      v.push_back({mn + " 3d" + sn, up(m, {s, s, s}, bal, k.align), {1, 2, 3, 4, 3}});
    }
    v.push_back({mn + " 2d x(3,1)", up(m, {3, 1}, bal, k.align), {2, 1, 4, 5}});
  }
  // Aligned corners over an extent of 1 (every output reads the one cell) and 2.
  v.push_back(
      {"linear aligned 2d x3 extents 1, 2", up(Mode::Linear, {3, 3}, bal, true), {1, 2, 1, 2}});
  return v;
}

// Independent float64 reference along one dim (PyTorch's source coordinates), applied
// dim by dim (upsampling is separable).
double src_coord(const UpsampleOptions& opt, Index o, Index s, Index L) {
  if (opt.mode == Mode::Nearest) return static_cast<double>(o / s);
  if (opt.align_corners)
    return L * s > 1 ? static_cast<double>(o * (L - 1)) / static_cast<double>(L * s - 1) : 0.0;
  return std::max((o + 0.5) / static_cast<double>(s) - 0.5, 0.0);
}
Tensor naive_upsample(const UpsampleOptions& opt, const Tensor& x) {
  Tensor cur = x.clone();
  for (std::size_t k = 0; k < opt.scale.size(); ++k) {
    const int d = 2 + static_cast<int>(k);
    std::vector<Index> shape = cur.shape();
    const Index L = shape[d], s = opt.scale[k];
    shape[d] = L * s;
    Tensor next = Tensor::empty(shape, DType::f64);
    Index outer = 1, inner = 1;
    for (int e = 0; e < d; ++e) outer *= shape[e];
    for (int e = d + 1; e < cur.ndim(); ++e) inner *= shape[e];
    for (Index a = 0; a < outer; ++a)
      for (Index o = 0; o < L * s; ++o)
        for (Index b = 0; b < inner; ++b) {
          const double src = src_coord(opt, o, s, L);
          const Index i0 = static_cast<Index>(std::floor(src));
          const Index i1 = std::min(i0 + 1, L - 1);
          const double w1 = opt.mode == Mode::Nearest ? 0.0 : src - i0;
          const double* c = cur.data<double>() + a * L * inner;
          next.data<double>()[(a * L * s + o) * inner + b] =
              (1 - w1) * c[i0 * inner + b] + w1 * c[i1 * inner + b];
        }
    cur = next;
  }
  return cur;
}
}  // namespace

TEST_CASE("Sharded upsampling equals single-rank upsampling, forward and backward", "[upsample]") {
  std::mt19937 rng(9);
  const ops::SweepResult r = ops::sweep_layouts(
      cases(), rng, 21, [](const UpsampleOptions& o) { return static_cast<int>(o.scale.size()); },
      [](const UpsampleOptions& o) -> std::unique_ptr<Layer> {
        return std::make_unique<Upsample>(o);
      });
  MPI_CHECK(r.runs > 0);
}

TEST_CASE("Upsampling on thin and empty shards", "[upsample]") {
  int runs = 0;
  for (const Mesh& mesh : test::test_meshes(test::harness_comm())) {
    if (mesh.ndim() > 2) continue;
    const auto dims = ops::layer_dims(mesh, 2);
    std::vector<std::vector<Index>> sizes(4);
    std::vector<Index> shape{2, 1, 3, 2};
    for (int d = 2; d < 4; ++d) {
      if (!dims[d].sharded()) continue;
      sizes[d] = ops::thin_sizes(mesh.dim(dims[d].axis), 2);
      shape[d] = ops::total(sizes[d]);
    }
    const Tensor x = ops::random_tensor(shape, DType::f64, 78);
    for (const Kind& k : kinds)
      for (Index s : {2, 3})
        for (OutputSplit split : {OutputSplit::Balanced, OutputSplit::Aligned}) {
          const UpsampleOptions o = up(k.mode, {s, s}, split, k.align);
          const auto e = ops::compare_with_single_rank(
              mesh, [&] { return std::make_unique<Upsample>(o); }, x, dims, sizes);
          INFO(mesh.str() << " shape " << shape_str(shape) << " scale " << s << ": y " << e.y
                          << " dx " << e.dx);
          MPI_CHECK(e.worst() <= 1e-11);
          ++runs;
        }
  }
  MPI_CHECK(runs > 0);
}

TEST_CASE("Upsampling matches naive float64 loops and is adjoint to its backward", "[upsample]") {
  for (const Case& c : cases()) {
    const Tensor x = ops::random_tensor(c.shape, DType::f64, 4);
    for (const Mesh& mesh : test::test_meshes(test::harness_comm())) {
      Upsample u(c.opts);
      const auto dims = ops::layer_dims(mesh, static_cast<int>(c.opts.scale.size()));
      const ShardTensor y = u.forward(ShardTensor::scatter(mesh, x, dims));
      const Tensor yf = y.gather_all();
      INFO(c.what << " on " << mesh.str());
      MPI_CHECK(ops::rel_error(yf, naive_upsample(c.opts, x)) <= 1e-15);
      // Upsampling is linear: <U x, w> == <x, U^T w>.
      const Tensor w = ops::random_tensor(y.global_shape(), DType::f64, 5);
      const Tensor xt = u.backward(ShardTensor::scatter(mesh, w, y.spec())).gather_all();
      double a = 0, b = 0;
      for (Index i = 0; i < yf.numel(); ++i) a += yf.data<double>()[i] * w.data<double>()[i];
      for (Index i = 0; i < x.numel(); ++i) b += x.data<double>()[i] * xt.data<double>()[i];
      MPI_CHECK(std::abs(a - b) <= 1e-13 * std::abs(a));
    }
  }
}

TEST_CASE("Linear upsampling with aligned corners gives PyTorch's values", "[upsample]") {
  // F.interpolate(torch.arange(1., 5.).view(1, 1, 4), scale_factor=2, mode='linear',
  // align_corners=True) = 1 + 3 o / 7: the end cells meet, the others spread evenly.
  const Mesh self = Mesh::line(MPI_COMM_SELF);
  Tensor x = Tensor::empty({1, 1, 4}, DType::f64);
  for (Index i = 0; i < 4; ++i) x.data<double>()[i] = static_cast<double>(i + 1);
  Upsample u(up(Mode::Linear, {2}, OutputSplit::Balanced, true));
  const Tensor y =
      u.forward(ShardTensor::scatter(self, x, ShardSpec::replicated(x.shape(), self))).local();
  REQUIRE(y.numel() == 8);
  double worst = 0;
  for (Index o = 0; o < 8; ++o)
    worst = std::max(worst, std::abs(y.data<double>()[o] - (1.0 + 3.0 * o / 7.0)));
  MPI_CHECK(worst <= 1e-15);
  MPI_CHECK(y.data<double>()[0] == 1.0);
  MPI_CHECK(y.data<double>()[7] == 4.0);
}

TEST_CASE("Upsampling gradients match finite differences (float64, one rank)", "[upsample]") {
  for (const Case& c : cases()) {
    const UpsampleOptions o = c.opts;
    const Tensor x = ops::random_tensor(c.shape, DType::f64, 8);
    const double err =
        ops::finite_difference_error([&] { return std::make_unique<Upsample>(o); }, x);
    INFO(c.what << ": " << err);
    MPI_CHECK(err <= 1e-7);
  }
}

TEST_CASE("Upsampling rejects bad parameters and inputs with clear errors", "[upsample]") {
  using ops::throws_error;
  MPI_CHECK(throws_error([] { Upsample u(up(Mode::Nearest, {})); }));
  MPI_CHECK(throws_error([] { Upsample u(up(Mode::Nearest, {2, 2, 2, 2})); }));
  MPI_CHECK(throws_error([] { Upsample u(up(Mode::Linear, {2, 0})); }));
  MPI_CHECK(test::throws_with(  // nearest has no corners to align (PyTorch refuses it too)
      [] { Upsample u(up(Mode::Nearest, {2}, OutputSplit::Balanced, true)); }, "align_corners"));
  const Mesh mesh = Mesh::line(test::harness_comm());
  Upsample u(up(Mode::Linear, {2, 2}));
  MPI_CHECK(throws_error([&] {
    u.output_spec(ShardSpec({1, 2, 8}, {Replicate(), Replicate(), Shard(0)}, mesh));
  }));
  MPI_CHECK(throws_error([&] { u.backward(ShardTensor()); }));
  const Tensor x = ops::random_tensor({1, 1, 4, 4}, DType::f64, 1);
  const ShardTensor y = u.forward(ShardTensor::scatter(mesh, x, ops::layer_dims(mesh, 2)));
  const Tensor wrong = ops::random_tensor({1, 1, 8, 8}, DType::f64, 2);
  MPI_CHECK(throws_error([&] {  // a gradient laid out unlike the output
    u.backward(
        ShardTensor::scatter(mesh, wrong, {Replicate(), Replicate(), Replicate(), Replicate()}));
  }));
}
