// Sharded max and average pooling against single-rank pooling (forward and input
// gradient) on 1-D, 2-D and 3-D meshes, even and uneven shards (empty shards and shards
// thinner than the halo included), overlapping windows, padding, ceil mode, dilation; a float64
// reference by naive loops (PyTorch's extent and divisor rules); finite differences; errors.
#include <cmath>
#include <limits>

#include "runtime/nn/pool_layer.hpp"
#include "tests/harness/mpi_test.hpp"
#include "tests/support/helpers.hpp"
#include "tests/support/layer_check.hpp"
#include "tests/support/layer_sweep.hpp"
#include "tests/support/ops_layer_check.hpp"

using namespace tessera;
namespace ops = tessera::test::ops;
using Kind = PoolOptions::Kind;

namespace {
PoolOptions pool(Kind kind, std::vector<Index> k, std::vector<Index> s, std::vector<Index> plo,
                 std::vector<Index> phi = {}, bool include_pad = true, bool ceil = false) {
  PoolOptions o;
  o.ceil_mode = ceil;
  o.kind = kind;
  o.kernel = std::move(k);
  o.stride = std::move(s);
  o.pad_lo = std::move(plo);
  o.pad_hi = std::move(phi);
  o.count_include_pad = include_pad;
  return o;
}
PoolOptions dilated(PoolOptions o, std::vector<Index> dilation) {
  o.dilation = std::move(dilation);
  return o;
}

struct Case {
  std::string what;
  PoolOptions opts;
  std::vector<Index> shape;
};

std::vector<Case> cases() {
  return {
      {"max 2d k3 s2 p1", pool(Kind::Max, {3, 3}, {2, 2}, {1, 1}), {2, 3, 11, 9}},
      {"avg 2d k2 s2", pool(Kind::Avg, {2, 2}, {}, {}), {2, 2, 12, 10}},
      {"max 2d k3 s1 p1", pool(Kind::Max, {3, 3}, {1, 1}, {1, 1}), {1, 2, 9, 7}},
      {"avg 2d k3 s1 p1 exclude pad",
       pool(Kind::Avg, {3, 3}, {1, 1}, {1, 1}, {}, false),
       {1, 2, 9, 7}},
      {"avg 2d k4 s1 pad 2/1 (even kernel, asymmetric)",
       pool(Kind::Avg, {4, 2}, {1, 1}, {2, 0}, {1, 1}),
       {2, 2, 10, 8}},
      {"max 2d k5x3 s3x2 p2x1", pool(Kind::Max, {5, 3}, {3, 2}, {2, 1}), {1, 3, 13, 9}},
      {"max 1d k3 s2 p1", pool(Kind::Max, {3}, {2}, {1}), {2, 3, 17}},
      {"avg 1d k3 s1", pool(Kind::Avg, {3}, {1}, {0}), {1, 2, 13}},
      {"max 3d k3 s2 p1", pool(Kind::Max, {3, 3, 3}, {2, 2, 2}, {1, 1, 1}), {1, 2, 7, 6, 5}},
      {"avg 3d k2 s2", pool(Kind::Avg, {2, 2, 2}, {}, {}), {1, 2, 6, 4, 8}},
      // Ceil mode: a last window overhanging the right padding (counted or not), a kernel
      // wider than the input, a window that would start in the right padding (dropped).
      {"max 2d k3 s2 ceil", pool(Kind::Max, {3, 3}, {2, 2}, {0, 0}, {}, true, true), {2, 2, 10, 8}},
      {"avg 2d k3 s2 p1 ceil",
       pool(Kind::Avg, {3, 3}, {2, 2}, {1, 1}, {}, true, true),
       {1, 2, 10, 9}},
      {"avg 2d k3x2 s2x3 p1/0 ceil exclude pad",
       pool(Kind::Avg, {3, 2}, {2, 3}, {1, 0}, {}, false, true),
       {2, 2, 12, 11}},
      {"avg 2d k4 s3 pad 1/2 ceil",
       pool(Kind::Avg, {4, 4}, {3, 3}, {1, 1}, {2, 0}, true, true),
       {1, 2, 11, 9}},
      {"max 1d k5 s3 ceil (overhang 2)",
       pool(Kind::Max, {5}, {3}, {0}, {}, true, true),
       {2, 3, 15}},
      {"max 1d k5 s3 ceil (kernel wider than the input)",
       pool(Kind::Max, {5}, {3}, {0}, {}, true, true),
       {1, 2, 4}},
      {"avg 1d k2 s2 p1 ceil (the window starting in the right padding dropped)",
       pool(Kind::Avg, {2}, {2}, {1}, {}, true, true),
       {1, 2, 5}},
      {"avg 1d k3 s2 ceil", pool(Kind::Avg, {3}, {2}, {0}, {}, true, true), {1, 2, 16}},
      {"max 3d k2 s2 ceil", pool(Kind::Max, {2, 2, 2}, {}, {}, {}, true, true), {1, 2, 7, 5, 6}},
      // Dilated max pooling (with padding, ceil mode, 1-3 dims).
      {"max 2d k3 d2 s1 p2",
       dilated(pool(Kind::Max, {3, 3}, {1, 1}, {2, 2}), {2, 2}),
       {1, 2, 11, 9}},
      {"max 2d k2x3 d3x2 s2 p1/0 ceil",
       dilated(pool(Kind::Max, {2, 3}, {2, 2}, {1, 0}, {}, true, true), {3, 2}),
       {2, 2, 12, 10}},
      {"max 1d k2 d3 s2 ceil",
       dilated(pool(Kind::Max, {2}, {2}, {0}, {}, true, true), {3}),
       {2, 2, 13}},
      {"max 3d k2 d2 s2 p1",
       dilated(pool(Kind::Max, {2, 2, 2}, {2, 2, 2}, {1, 1, 1}), {2, 2, 2}),
       {1, 1, 7, 6, 5}},
      {"avg 3d k3 s2 p1 ceil",
       pool(Kind::Avg, {3, 3, 3}, {2, 2, 2}, {1, 1, 1}, {}, true, true),
       {1, 1, 6, 7, 5}},
  };
}

// PyTorch's pooling output extent (pooling_output_shape): the padded room divided by the
// stride, rounded up in ceil mode, less a last window that would start past the input and
// the left padding.
Index torch_out_extent(Index L, Index k, Index s, Index plo, Index phi, bool ceil) {
  const Index room = L + plo + phi - k + (ceil ? s - 1 : 0);
  Index out = (room >= 0 ? room / s : -((-room + s - 1) / s)) + 1;
  if (ceil && (out - 1) * s >= L + plo) --out;
  return out;
}

// Independent float64 reference: pooling by naive loops over a 2-D (N, C, H, W) tensor,
// dividing as PyTorch does (the window clipped to the padded extent, or its real cells).
Tensor naive_pool2d(const PoolOptions& o, const Tensor& x) {
  const Index N = x.shape(0), C = x.shape(1), H = x.shape(2), W = x.shape(3);
  const Index span0 = o.dilation[0] * (o.kernel[0] - 1) + 1;
  const Index span1 = o.dilation[1] * (o.kernel[1] - 1) + 1;
  const Index OH = torch_out_extent(H, span0, o.stride[0], o.pad_lo[0], o.pad_hi[0], o.ceil_mode);
  const Index OW = torch_out_extent(W, span1, o.stride[1], o.pad_lo[1], o.pad_hi[1], o.ceil_mode);
  Tensor y = Tensor::empty({N, C, OH, OW}, DType::f64);
  for (Index n = 0; n < N; ++n)
    for (Index c = 0; c < C; ++c)
      for (Index i = 0; i < OH; ++i)
        for (Index j = 0; j < OW; ++j) {
          double best = -std::numeric_limits<double>::infinity(), sum = 0;
          Index real = 0;
          for (Index a = 0; a < o.kernel[0]; ++a)
            for (Index b = 0; b < o.kernel[1]; ++b) {
              const Index h = i * o.stride[0] - o.pad_lo[0] + a * o.dilation[0];
              const Index w = j * o.stride[1] - o.pad_lo[1] + b * o.dilation[1];
              if (h < 0 || h >= H || w < 0 || w >= W) continue;
              const double v = x.at<double>({n, c, h, w});
              best = std::max(best, v);
              sum += v;
              ++real;
            }
          const Index h0 = i * o.stride[0] - o.pad_lo[0], w0 = j * o.stride[1] - o.pad_lo[1];
          const Index padded = (std::min(h0 + o.kernel[0], H + o.pad_hi[0]) - h0) *
                               (std::min(w0 + o.kernel[1], W + o.pad_hi[1]) - w0);
          const double div = o.count_include_pad ? double(padded) : double(real);
          y.at<double>({n, c, i, j}) = o.kind == Kind::Max ? best : sum / div;
        }
  return y;
}
}  // namespace

TEST_CASE("Sharded pooling equals single-rank pooling, forward and backward", "[pool]") {
  std::mt19937 rng(5);
  const auto [runs, worst] = ops::sweep_layouts(
      cases(), rng, 11, [](const PoolOptions& o) { return static_cast<int>(o.kernel.size()); },
      [](const PoolOptions& o) -> std::unique_ptr<Layer> { return std::make_unique<Pool>(o); });
  INFO("runs " << runs << ", worst relative error " << worst);
  MPI_CHECK(runs > 0);
}

TEST_CASE("Pooling on shards thinner than the halo, empty shards included", "[pool]") {
  const std::vector<PoolOptions> opts{
      pool(Kind::Max, {5, 5}, {1, 1}, {2, 2}),
      pool(Kind::Avg, {3, 3}, {2, 2}, {1, 1}),
      pool(Kind::Max, {4, 3}, {3, 1}, {2, 1}, {1, 0}),
      pool(Kind::Avg, {2, 2}, {2, 2}, {0, 0}, {0, 0}, false),
      pool(Kind::Avg, {3, 3}, {2, 2}, {1, 1}, {}, true, true),
      dilated(pool(Kind::Max, {3, 2}, {2, 2}, {1, 0}, {}, true, true), {2, 1})};
  int runs = 0;
  for (const Mesh& mesh : test::test_meshes(test::harness_comm())) {
    if (mesh.ndim() > 2) continue;
    const auto dims = ops::layer_dims(mesh, 2);
    std::vector<std::vector<Index>> sizes(4);
    std::vector<Index> shape{1, 2, 5, 4};
    for (int d = 2; d < 4; ++d) {
      if (!dims[d].sharded()) continue;
      sizes[d] = ops::thin_sizes(mesh.dim(dims[d].axis), 4);
      shape[d] = ops::total(sizes[d]);
    }
    if (dims[0].sharded()) sizes[0] = std::vector<Index>(mesh.dim(dims[0].axis), 0);
    if (dims[0].sharded()) sizes[0][0] = 1;  // one sample: the other data ranks hold none
    const Tensor x = ops::random_tensor(shape, DType::f64, 77);
    for (PoolOptions o : opts) {
      for (OutputSplit split : {OutputSplit::Balanced, OutputSplit::Aligned}) {
        o.split = split;
        const auto e = ops::compare_with_single_rank(
            mesh, [&] { return std::make_unique<Pool>(o); }, x, dims, sizes);
        INFO(mesh.str() << " shape " << shape_str(shape) << " kernel " << o.kernel[0] << "x"
                        << o.kernel[1] << ": y " << e.y << " dx " << e.dx);
        MPI_CHECK(e.worst() <= 1e-11);
        ++runs;
      }
    }
  }
  MPI_CHECK(runs > 0);
}

TEST_CASE("Pooling matches naive float64 loops", "[pool]") {
  const Mesh self = Mesh::line(MPI_COMM_SELF);
  for (const Case& c : cases()) {
    if (c.opts.kernel.size() != 2) continue;
    Pool p(c.opts);
    const PoolOptions& o = p.options();  // defaults resolved
    const Tensor x = ops::random_tensor(c.shape, DType::f64, 3);
    const Tensor y =
        p.forward(ShardTensor::scatter(self, x, ShardSpec::replicated(x.shape(), self))).local();
    INFO(c.what);
    MPI_CHECK(ops::rel_error(y, naive_pool2d(o, x)) <= 1e-15);
  }
}

TEST_CASE("Ceil-mode pooling gives PyTorch's values", "[pool]") {
  // torch.nn.functional.{avg,max}_pool1d(torch.arange(1., 7.).view(1, 1, 6), 3, 2, p,
  // ceil_mode=True): the last window overhangs the padding and divides by its part inside.
  const Mesh self = Mesh::line(MPI_COMM_SELF);
  Tensor x = Tensor::empty({1, 1, 6}, DType::f64);
  for (Index i = 0; i < 6; ++i) x.data<double>()[i] = static_cast<double>(i + 1);
  const auto run = [&](Kind kind, Index pad, bool include_pad) {
    Pool p(pool(kind, {3}, {2}, {pad}, {}, include_pad, true));
    return p.forward(ShardTensor::scatter(self, x, ShardSpec::replicated(x.shape(), self))).local();
  };
  const auto values = [](const Tensor& t) {
    return std::vector<double>(t.data<double>(), t.data<double>() + t.numel());
  };
  using V = std::vector<double>;
  MPI_CHECK((values(run(Kind::Avg, 0, true)) == V{2, 4, 5.5}));
  MPI_CHECK((values(run(Kind::Max, 0, true)) == V{3, 5, 6}));
  MPI_CHECK((values(run(Kind::Avg, 1, true)) == V{1, 3, 5, 3}));
  MPI_CHECK((values(run(Kind::Avg, 1, false)) == V{1.5, 3, 5, 6}));
  MPI_CHECK((values(run(Kind::Max, 1, true)) == V{2, 4, 6, 6}));
}

TEST_CASE("Pooling: the adjoint identity <pool(x), w> = <x, pool^T(w)> for average pooling",
          "[pool]") {
  // Average pooling is linear: its backward is its exact adjoint, on every mesh.
  for (const Mesh& mesh : test::test_meshes(test::harness_comm())) {
    Pool p(pool(Kind::Avg, {3, 2}, {2, 1}, {1, 0}, {1, 1}));
    const std::vector<Index> shape{1, 2, 9, 7};
    const auto dims = ops::layer_dims(mesh, 2);
    const Tensor x = ops::random_tensor(shape, DType::f64, 1);
    const ShardTensor y = p.forward(ShardTensor::scatter(mesh, x, dims));
    const Tensor w = ops::random_tensor(y.global_shape(), DType::f64, 2);
    const Tensor xt = p.backward(ShardTensor::scatter(mesh, w, y.spec())).gather_all();
    const Tensor yf = y.gather_all();
    double a = 0, b = 0;
    for (Index i = 0; i < yf.numel(); ++i) a += yf.data<double>()[i] * w.data<double>()[i];
    for (Index i = 0; i < x.numel(); ++i) b += x.data<double>()[i] * xt.data<double>()[i];
    INFO(mesh.str() << ": " << a << " vs " << b);
    MPI_CHECK(std::abs(a - b) <= 1e-13 * std::abs(a));
  }
}

TEST_CASE("Pooling gradients match finite differences (float64, one rank)", "[pool]") {
  for (const Case& c : cases()) {
    const PoolOptions o = c.opts;
    const Tensor x = ops::random_tensor(c.shape, DType::f64, 9);
    const double err = ops::finite_difference_error([&] { return std::make_unique<Pool>(o); }, x);
    INFO(c.what << ": " << err);
    MPI_CHECK(err <= 1e-7);
  }
}

TEST_CASE("Pooling rejects bad parameters and inputs with clear errors", "[pool]") {
  using ops::throws_error;
  MPI_CHECK(throws_error([] { Pool p(pool(Kind::Max, {}, {}, {})); }));
  MPI_CHECK(throws_error([] { Pool p(pool(Kind::Max, {3, 3, 3, 3}, {}, {})); }));
  MPI_CHECK(throws_error([] { Pool p(pool(Kind::Max, {3}, {0}, {})); }));
  MPI_CHECK(throws_error([] { Pool p(pool(Kind::Max, {3}, {1}, {-1})); }));
  MPI_CHECK(throws_error([] { Pool p(pool(Kind::Max, {3}, {1}, {3})); }));     // pad >= kernel
  MPI_CHECK(throws_error([] { Pool p(pool(Kind::Max, {3, 3}, {1}, {0})); }));  // stride rank
  MPI_CHECK(test::throws_with(  // PyTorch's average pooling has no dilation
      [] { Pool p(dilated(pool(Kind::Avg, {3}, {1}, {0}), {2})); }, "needs max pooling"));
  MPI_CHECK(throws_error([] { Pool p(dilated(pool(Kind::Max, {3}, {1}, {0}), {0})); }));
  {
    // k2 dilation 3 pad 1 over 2 cells: the one window reads cells -1 and 2, neither inside.
    Pool stepped(dilated(pool(Kind::Max, {2}, {1}, {1}), {3}));
    const ShardSpec two({1, 1, 2}, {Replicate(), Replicate(), Replicate()},
                        Mesh::line(test::harness_comm()));
    MPI_CHECK(test::throws_with([&] { stepped.output_spec(two); }, "dilation steps over"));
  }
  const Mesh mesh = Mesh::line(test::harness_comm());
  Pool p(pool(Kind::Max, {3, 3}, {2, 2}, {1, 1}));
  const ShardSpec wrong_rank({1, 2, 8}, {Replicate(), Replicate(), Shard(0)}, mesh);
  MPI_CHECK(throws_error([&] { p.output_spec(wrong_rank); }));
  const ShardSpec too_small({1, 1, 1, 8}, {Replicate(), Replicate(), Replicate(), Shard(0)}, mesh);
  Pool big(pool(Kind::Avg, {4, 1}, {1, 1}, {0, 0}));
  MPI_CHECK(throws_error([&] { big.output_spec(too_small); }));
  const ShardSpec partial({1, 1, 8, 8}, {Replicate(), Replicate(), Replicate(), Replicate()}, mesh,
                          {0});
  MPI_CHECK(throws_error([&] { p.output_spec(partial); }));
  MPI_CHECK(throws_error([&] { p.backward(ShardTensor()); }));  // before forward
  // An int64 input.
  const Tensor xi = Tensor::zeros({1, 1, 4, 4}, DType::i64);
  MPI_CHECK(throws_error([&] {
    p.forward(ShardTensor::scatter(mesh, xi, {Replicate(), Replicate(), Shard(0), Replicate()}));
  }));
}
