// Sharded padding (constant, reflect, replicate, circular; 1-D, 2-D, 3-D; per-side widths) against
// single-rank padding, forward and input gradient, on 1-D, 2-D and 3-D meshes with even,
// uneven, thin and empty shards (a block of padding only, an end block thinner than the
// cells its padding mirrors); an independent float64 reference (PyTorch's F.pad rules);
// PyTorch's values; adjoint identity; finite differences; errors.
#include <cmath>

#include "runtime/nn/pad_layer.hpp"
#include "tests/harness/mpi_test.hpp"
#include "tests/support/helpers.hpp"
#include "tests/support/layer_check.hpp"
#include "tests/support/layer_sweep.hpp"
#include "tests/support/ops_layer_check.hpp"

using namespace tessera;
namespace ops = tessera::test::ops;
using Mode = PadOptions::Mode;

namespace {
PadOptions pad(Mode m, std::vector<Index> lo, std::vector<Index> hi = {},
               OutputSplit split = OutputSplit::Balanced, double value = 0.0) {
  PadOptions o;
  o.mode = m;
  o.pad_lo = std::move(lo);
  o.pad_hi = std::move(hi);
  o.split = split;
  o.value = value;
  return o;
}

struct Case {
  std::string what;
  PadOptions opts;
  std::vector<Index> shape;
};

std::vector<Case> cases() {
  std::vector<Case> v;
  const std::pair<Mode, std::string> modes[] = {{Mode::Constant, "constant"},
                                                {Mode::Reflect, "reflect"},
                                                {Mode::Replicate, "replicate"},
                                                {Mode::Circular, "circular"}};
  for (const auto& [m, mn] : modes) {
    const OutputSplit b = OutputSplit::Balanced;
    v.push_back({mn + " 1d 2/3", pad(m, {2}, {3}, b, 1.5), {2, 2, 7}});
    v.push_back({mn + " 2d 1/2 x 3/0", pad(m, {1, 3}, {2, 0}, b, -2.0), {1, 2, 5, 6}});
    v.push_back({mn + " 3d 1", pad(m, {1, 1, 1}), {1, 2, 3, 4, 3}});
    v.push_back({mn + " 2d wide (extent - 1)", pad(m, {4, 2}, {4, 2}), {1, 1, 5, 3}});
  }
  // Replicate and constant take padding wider than the extent.
  v.push_back(
      {"replicate 2d wider than the extent", pad(Mode::Replicate, {5, 1}, {3, 6}), {1, 2, 2, 3}});
  v.push_back({"constant 1d wider than the extent",
               pad(Mode::Constant, {6}, {5}, OutputSplit::Balanced, 3.0),
               {1, 2, 2}});
  v.push_back({"replicate 1d over one cell", pad(Mode::Replicate, {3}, {2}), {2, 1, 1}});
  // Circular padding wrapping more than once (PyTorch refuses it; the index rule holds).
  v.push_back(
      {"circular 2d wider than the extent", pad(Mode::Circular, {5, 1}, {3, 7}), {1, 2, 2, 3}});
  v.push_back({"circular 1d over one cell", pad(Mode::Circular, {3}, {2}), {2, 1, 1}});
  // Negative widths crop (F.pad's rule: output o copies the source of o - pad_lo).
  for (const auto& [m, mn] : modes) {
    if (m == Mode::Circular) continue;  // refused with negative widths
    v.push_back({mn + " 1d crop -2/1", pad(m, {-2}, {1}), {2, 2, 6}});
    v.push_back({mn + " 2d crop and pad", pad(m, {-1, 2}, {3, -3}), {1, 2, 5, 6}});
    v.push_back({mn + " 3d crop", pad(m, {-1, 1, 0}, {0, -1, -2}), {1, 1, 3, 4, 5}});
    v.push_back({mn + " 1d crop past the input", pad(m, {-6}, {2}), {1, 2, 6}});
  }
  return v;
}

// Independent float64 reference along one dim (PyTorch's F.pad index rules), dim by dim.
Tensor naive_pad(const PadOptions& o, const Tensor& x) {
  Tensor cur = x.clone();
  for (std::size_t k = 0; k < o.pad_lo.size(); ++k) {
    const int d = 2 + static_cast<int>(k);
    std::vector<Index> shape = cur.shape();
    const Index L = shape[d], lo = o.pad_lo[k], hi = o.pad_hi.empty() ? lo : o.pad_hi[k];
    shape[d] = L + lo + hi;
    Tensor next = Tensor::empty(shape, DType::f64);
    Index outer = 1, inner = 1;
    for (int e = 0; e < d; ++e) outer *= shape[e];
    for (int e = d + 1; e < cur.ndim(); ++e) inner *= shape[e];
    for (Index a = 0; a < outer; ++a)
      for (Index out = 0; out < shape[d]; ++out)
        for (Index b = 0; b < inner; ++b) {
          Index i = out - lo;
          // Only the padding along this dim is the constant: earlier dims' is already there.
          bool constant = false;
          if (i < 0 || i >= L) {
            if (o.mode == Mode::Constant) constant = true;
            if (o.mode == Mode::Replicate) i = i < 0 ? 0 : L - 1;
            if (o.mode == Mode::Reflect) i = i < 0 ? -i : 2 * (L - 1) - i;
            if (o.mode == Mode::Circular) i = ((i % L) + L) % L;
          }
          next.data<double>()[(a * shape[d] + out) * inner + b] =
              constant ? o.value : cur.data<double>()[(a * L + i) * inner + b];
        }
    cur = next;
  }
  return cur;
}
}  // namespace

TEST_CASE("Sharded padding equals single-rank padding, forward and backward", "[pad]") {
  std::mt19937 rng(17);
  const ops::SweepResult r = ops::sweep_layouts(
      cases(), rng, 31, [](const PadOptions& o) { return static_cast<int>(o.pad_lo.size()); },
      [](const PadOptions& o) -> std::unique_ptr<Layer> { return std::make_unique<Pad>(o); });
  MPI_CHECK(r.runs > 0);
}

TEST_CASE("Padding on thin and empty shards, balanced and aligned", "[pad]") {
  // Blocks of padding only, and end blocks thinner than the cells their padding reads.
  int runs = 0;
  for (const Mesh& mesh : test::test_meshes(test::harness_comm())) {
    if (mesh.ndim() > 2) continue;
    const auto dims = ops::layer_dims(mesh, 2);
    std::vector<std::vector<Index>> sizes(4);
    std::vector<Index> shape{2, 1, 4, 5};
    for (int d = 2; d < 4; ++d) {
      if (!dims[d].sharded()) continue;
      sizes[d] = ops::thin_sizes(mesh.dim(dims[d].axis), 4);
      shape[d] = ops::total(sizes[d]);
    }
    const Tensor x = ops::random_tensor(shape, DType::f64, 79);
    for (Mode m : {Mode::Constant, Mode::Reflect, Mode::Replicate, Mode::Circular})
      for (OutputSplit split : {OutputSplit::Balanced, OutputSplit::Aligned}) {
        const Index w = std::min<Index>(3, std::min(shape[2], shape[3]) - 1);
        const PadOptions o = pad(m, {w, 1}, {1, w}, split, 0.5);
        const auto e = ops::compare_with_single_rank(
            mesh, [&] { return std::make_unique<Pad>(o); }, x, dims, sizes);
        INFO(mesh.str() << " shape " << shape_str(shape) << " mode " << static_cast<int>(m)
                        << ": y " << e.y << " dx " << e.dx);
        MPI_CHECK(e.worst() <= 1e-11);
        ++runs;
      }
  }
  MPI_CHECK(runs > 0);
}

TEST_CASE("Padding matches naive float64 loops and is adjoint to its backward", "[pad]") {
  for (const Case& c : cases()) {
    const Tensor x = ops::random_tensor(c.shape, DType::f64, 4);
    for (const Mesh& mesh : test::test_meshes(test::harness_comm())) {
      Pad p(c.opts);
      const auto dims = ops::layer_dims(mesh, static_cast<int>(c.opts.pad_lo.size()));
      const ShardTensor y = p.forward(ShardTensor::scatter(mesh, x, dims));
      const Tensor yf = y.gather_all();
      INFO(c.what << " on " << mesh.str());
      MPI_CHECK(ops::rel_error(yf, naive_pad(p.options(), x)) == 0.0);     // copies: exact
      if (c.opts.mode == Mode::Constant && c.opts.value != 0.0) continue;  // affine, not linear
      // Padding is linear: <P x, w> == <x, P^T w>.
      const Tensor w = ops::random_tensor(y.global_shape(), DType::f64, 5);
      const Tensor xt = p.backward(ShardTensor::scatter(mesh, w, y.spec())).gather_all();
      double a = 0, b = 0;
      for (Index i = 0; i < yf.numel(); ++i) a += yf.data<double>()[i] * w.data<double>()[i];
      for (Index i = 0; i < x.numel(); ++i) b += x.data<double>()[i] * xt.data<double>()[i];
      MPI_CHECK(std::abs(a - b) <= 1e-13 * std::abs(a));
    }
  }
}

TEST_CASE("Padding gives PyTorch's values", "[pad]") {
  // F.pad(torch.arange(1., 5.).view(1, 1, 4), (3, 2), mode=...).
  const Mesh self = Mesh::line(MPI_COMM_SELF);
  Tensor x = Tensor::empty({1, 1, 4}, DType::f64);
  for (Index i = 0; i < 4; ++i) x.data<double>()[i] = static_cast<double>(i + 1);
  const auto run = [&](Mode m) {
    Pad p(pad(m, {3}, {2}, OutputSplit::Balanced, 9.0));
    const Tensor y =
        p.forward(ShardTensor::scatter(self, x, ShardSpec::replicated(x.shape(), self))).local();
    return std::vector<double>(y.data<double>(), y.data<double>() + y.numel());
  };
  using V = std::vector<double>;
  MPI_CHECK((run(Mode::Reflect) == V{4, 3, 2, 1, 2, 3, 4, 3, 2}));
  MPI_CHECK((run(Mode::Replicate) == V{1, 1, 1, 1, 2, 3, 4, 4, 4}));
  MPI_CHECK((run(Mode::Constant) == V{9, 9, 9, 1, 2, 3, 4, 9, 9}));
  MPI_CHECK((run(Mode::Circular) == V{2, 3, 4, 1, 2, 3, 4, 1, 2}));
  // Negative widths: F.pad(torch.arange(1., 6.).view(1, 1, 5), (lo, hi), mode=...).
  Tensor x5 = Tensor::empty({1, 1, 5}, DType::f64);
  for (Index i = 0; i < 5; ++i) x5.data<double>()[i] = static_cast<double>(i + 1);
  const auto run5 = [&](Mode m, Index lo, Index hi) {
    Pad p(pad(m, {lo}, {hi}));
    const Tensor y =
        p.forward(ShardTensor::scatter(self, x5, ShardSpec::replicated(x5.shape(), self))).local();
    return std::vector<double>(y.data<double>(), y.data<double>() + y.numel());
  };
  MPI_CHECK((run5(Mode::Constant, -1, 2) == V{2, 3, 4, 5, 0, 0}));
  MPI_CHECK((run5(Mode::Constant, 3, -4) == V{0, 0, 0, 1}));
  MPI_CHECK((run5(Mode::Constant, -5, 1) == V{0}));
  MPI_CHECK((run5(Mode::Reflect, 2, -1) == V{3, 2, 1, 2, 3, 4}));
  MPI_CHECK((run5(Mode::Reflect, -5, 1) == V{4}));
  MPI_CHECK((run5(Mode::Reflect, 3, -4) == V{4, 3, 2, 1}));
  MPI_CHECK((run5(Mode::Replicate, -1, 2) == V{2, 3, 4, 5, 5, 5}));
  MPI_CHECK((run5(Mode::Replicate, 3, -4) == V{1, 1, 1, 1}));
  MPI_CHECK((run5(Mode::Replicate, -5, 1) == V{5}));
}

TEST_CASE("Padding gradients match finite differences (float64, one rank)", "[pad]") {
  for (const Case& c : cases()) {
    const PadOptions o = c.opts;
    const Tensor x = ops::random_tensor(c.shape, DType::f64, 8);
    const double err = ops::finite_difference_error([&] { return std::make_unique<Pad>(o); }, x);
    INFO(c.what << ": " << err);
    MPI_CHECK(err <= 1e-7);
  }
}

TEST_CASE("Padding rejects bad parameters and inputs with clear errors", "[pad]") {
  using ops::throws_error;
  MPI_CHECK(throws_error([] { Pad p(pad(Mode::Reflect, {})); }));
  MPI_CHECK(throws_error([] { Pad p(pad(Mode::Reflect, {1, 1, 1, 1})); }));
  MPI_CHECK(throws_error([] { Pad p(pad(Mode::Reflect, {1, Index{1} << 50})); }));
  MPI_CHECK(throws_error([] { Pad p(pad(Mode::Constant, {-(Index{1} << 50)})); }));
  // PyTorch's circular padding wraps the cropped tensor (and fails for some widths): refused.
  MPI_CHECK(test::throws_with([] { Pad p(pad(Mode::Circular, {2, -1})); }, "crop first"));
  MPI_CHECK(throws_error([] { Pad p(pad(Mode::Reflect, {1, 1}, {1})); }));
  const Mesh mesh = Mesh::line(test::harness_comm());
  Pad reflect(pad(Mode::Reflect, {2, 3}));
  // Reflect padding as wide as the extent (PyTorch refuses it too), on every rank alike.
  MPI_CHECK(test::throws_with(
      [&] {
        reflect.output_spec(
            ShardSpec({1, 1, 8, 3}, {Replicate(), Replicate(), Shard(0), Replicate()}, mesh));
      },
      "narrower than the extent"));
  MPI_CHECK(throws_error([&] {
    reflect.output_spec(ShardSpec({1, 2, 8}, {Replicate(), Replicate(), Shard(0)}, mesh));
  }));
  // Cropping every cell is refused (PyTorch makes an empty tensor in some modes).
  MPI_CHECK(test::throws_with(
      [&] {
        Pad(pad(Mode::Constant, {-3}, {-2}))
            .output_spec(ShardSpec({1, 1, 5}, {Replicate(), Replicate(), Shard(0)}, mesh));
      },
      "crops all 5 cells"));
  MPI_CHECK(throws_error([&] { reflect.backward(ShardTensor()); }));
  if (mesh.size() > 1) {
    // A plan rebuilt for another input layout between forward and backward (input_room of
    // shards cut elsewhere, the same output): backward refuses instead of using the
    // forward's window in the other layout's frame.
    Pad p(pad(Mode::Replicate, {1}));
    const std::vector<Placement> dims{Replicate(), Replicate(), Shard(0)};
    const Tensor x = ops::random_tensor({1, 1, 4 * mesh.size()}, DType::f64, 3);
    const ShardTensor y = p.forward(ShardTensor::scatter(mesh, x, dims));
    std::vector<Index> cut(static_cast<std::size_t>(mesh.size()), 4);
    cut[0] = 3;
    cut[1] = 5;
    p.input_room(mesh, ShardSpec(x.shape(), dims, mesh, {}, {{}, {}, cut}));
    MPI_CHECK(test::throws_with([&] { p.backward(y); }, "backward before forward"));
  }
}
