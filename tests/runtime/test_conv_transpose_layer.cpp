#include <random>

#include "runtime/nn/conv_transpose_layer.hpp"
#include "tests/harness/mpi_test.hpp"
#include "tests/support/conv_sweep.hpp"
#include "tests/support/helpers.hpp"
#include "tests/support/layer_check.hpp"

using namespace tessera;

namespace {

struct TCase {
  std::string label;
  ConvTransposeOptions o;
  std::vector<Index> shape;  // input (N, C, spatial...)
};

ConvTransposeOptions tconv(int nd, Index cin, Index cout, std::vector<Index> k,
                           std::vector<Index> s, std::vector<Index> pad,
                           std::vector<Index> out_pad = {0}, std::vector<Index> dil = {1},
                           Index groups = 1, std::vector<Index> pad_hi = {}) {
  ConvTransposeOptions o;
  o.nd = nd;
  o.in_channels = cin;
  o.out_channels = cout;
  o.kernel = k;
  o.stride = s;
  o.padding = pad;
  o.padding_hi = pad_hi;
  o.output_padding = out_pad;
  o.dilation = dil;
  o.groups = groups;
  o.seed = 4;
  return o;
}

// kernel == stride (no overlap), kernel > stride (overlapping writes: the adjoint halo adds
// them), kernel < stride (gaps), even kernels, padding and output_padding, dilation, groups,
// asymmetric cropping, thin shards (small inputs), 2-D and 3-D.
std::vector<TCase> tcases() {
  std::vector<TCase> c;
  c.push_back({"1d k2 s2", tconv(1, 2, 3, {2}, {2}, {0}), {1, 2, 7}});
  c.push_back({"1d k4 s2 p1", tconv(1, 2, 2, {4}, {2}, {1}), {2, 2, 8}});
  c.push_back({"1d k3 s2 p1 op1", tconv(1, 2, 2, {3}, {2}, {1}, {1}), {1, 2, 7}});
  c.push_back({"1d k3 s1 p1", tconv(1, 3, 2, {3}, {1}, {1}), {1, 3, 9}});
  c.push_back({"1d k5 s1 d2 (wide overlap)", tconv(1, 1, 2, {5}, {1}, {0}, {0}, {2}), {1, 1, 6}});
  c.push_back({"1d k2 s3 (gaps)", tconv(1, 2, 1, {2}, {3}, {0}, {2}), {1, 2, 5}});
  c.push_back(
      {"1d k4 s2 p2/1 groups 2", tconv(1, 4, 2, {4}, {2}, {2}, {0}, {1}, 2, {1}), {1, 4, 6}});
  c.push_back({"2d k4 s2 p1", tconv(2, 2, 2, {4}, {2}, {1}), {1, 2, 5, 6}});
  c.push_back({"2d k3x2 s2x1 op1x0", tconv(2, 2, 3, {3, 2}, {2, 1}, {1, 0}, {1, 0}), {1, 2, 4, 7}});
  c.push_back({"3d k3 s2 p1 op1", tconv(3, 2, 2, {3}, {2}, {1}, {1}), {1, 2, 3, 4, 3}});
  // Cropping as wide as the window span (a cropping Pad after the scatter).
  c.push_back(
      {"1d k3 s2 p4 op1 (crops past the span)", tconv(1, 2, 2, {3}, {2}, {4}, {1}), {1, 2, 9}});
  c.push_back({"2d k2 s2 p0x3/2x4 op0x1",
               tconv(2, 1, 2, {2}, {2}, {0, 3}, {0, 1}, {1}, 1, {2, 4}),
               {1, 1, 4, 6}});
  return c;
}

// Naive float64 transposed conv: every input cell scatters its window into the output.
Tensor naive_tconv(const TCase& c, const Tensor& x, const Tensor& w, const Tensor& b) {
  const ConvTransposeOptions& o = c.o;
  const int nd = o.nd;
  auto at = [](const std::vector<Index>& v, int d) { return v.size() == 1 ? v[0] : v[d]; };
  std::vector<Index> k(3, 1), s(3, 1), dl(3, 1), p(3, 0), n(3, 1), out(3, 1);
  std::vector<Index> yshape = {x.shape(0), o.out_channels};
  for (int d = 0; d < nd; ++d) {
    k[d] = at(o.kernel, d);
    s[d] = at(o.stride, d);
    dl[d] = at(o.dilation, d);
    p[d] = at(o.padding, d);
    const Index phi = o.padding_hi.empty() ? p[d] : at(o.padding_hi, d);
    n[d] = x.shape(2 + d);
    out[d] = (n[d] - 1) * s[d] - p[d] - phi + dl[d] * (k[d] - 1) + 1 + at(o.output_padding, d);
    yshape.push_back(out[d]);
  }
  Tensor y = Tensor::zeros(yshape, DType::f64);
  const Tensor yv = y.reshape({x.shape(0), o.out_channels, out[0], out[1], out[2]});
  const Tensor xv = x.reshape({x.shape(0), o.in_channels, n[0], n[1], n[2]});
  const Tensor wv = w.reshape({o.in_channels, o.out_channels / o.groups, k[0], k[1], k[2]});
  const Index cig = o.in_channels / o.groups, cog = o.out_channels / o.groups;
  for (Index bn = 0; bn < x.shape(0); ++bn)
    for (Index ci = 0; ci < o.in_channels; ++ci)
      for (Index i0 = 0; i0 < n[0]; ++i0)
        for (Index i1 = 0; i1 < n[1]; ++i1)
          for (Index i2 = 0; i2 < n[2]; ++i2)
            for (Index co = 0; co < cog; ++co)
              for (Index j0 = 0; j0 < k[0]; ++j0)
                for (Index j1 = 0; j1 < k[1]; ++j1)
                  for (Index j2 = 0; j2 < k[2]; ++j2) {
                    const Index q[3] = {i0 * s[0] - p[0] + j0 * dl[0],
                                        i1 * s[1] - p[1] + j1 * dl[1],
                                        i2 * s[2] - p[2] + j2 * dl[2]};
                    bool inside = true;
                    for (int d = 0; d < 3; ++d) inside = inside && q[d] >= 0 && q[d] < out[d];
                    if (!inside) continue;
                    yv.at<double>({bn, (ci / cig) * cog + co, q[0], q[1], q[2]}) +=
                        wv.at<double>({ci, co, j0, j1, j2}) * xv.at<double>({bn, ci, i0, i1, i2});
                  }
  if (b.defined())
    for (Index i = 0; i < y.numel(); ++i)
      y.data<double>()[i] += b.data<double>()[(i / (out[0] * out[1] * out[2])) % o.out_channels];
  return y;
}

void run_cases(const std::vector<TCase>& cases, DType dt, double tol, int trials_per_mesh) {
  test::sweep_conv_cases(
      cases, dt, tol, trials_per_mesh, 29, 200,
      [](ConvTransposeOptions&, int) { return std::string(); },
      [](const ConvTransposeOptions& o) { return std::make_unique<ConvTransposeNd>(o); });
}

}  // namespace

TEST_CASE("One-rank transposed conv equals a naive float64 one", "[tconv][full]") {
  test::check_one_rank_naive<ConvTransposeNd>(tcases(), naive_tconv);
}

TEST_CASE("Sharded transposed conv equals one rank, float64, forward and gradients",
          "[tconv][full]") {
  run_cases(tcases(), DType::f64, 1e-11, 2);
}

TEST_CASE("Sharded transposed conv equals one rank, float32", "[tconv][full]") {
  run_cases(test::subset(tcases(), {1, 2, 7, 9}), DType::f32, 1e-5, 1);
}

TEST_CASE("Sharded transposed conv, subset for many ranks", "[tconv][subset]") {
  run_cases(test::subset(tcases(), {1, 4, 5, 7, 10, 11}), DType::f64, 1e-11, 2);
}

TEST_CASE("Transposed conv gradients match finite differences on one rank",
          "[tconv][full][subset]") {
  test::check_finite_differences<ConvTransposeNd>(tcases(), 37);
}

TEST_CASE("Transposed conv rejects bad parameters and inputs", "[tconv][full][subset]") {
  const auto& throws = test::throws_with;
  MPI_CHECK(throws([] { ConvTransposeNd(tconv(1, 2, 2, {3}, {2}, {0}, {2})); }, "output_padding"));
  MPI_CHECK(throws([] { ConvTransposeNd(tconv(1, 2, 3, {3}, {2}, {0}, {0}, {1}, 2)); }, "groups"));
  const Mesh mesh = Mesh::line(MPI_COMM_WORLD);
  {
    // Cropping more than the whole output: refused for the input, on every rank alike.
    ConvTransposeNd over(tconv(1, 2, 2, {3}, {1}, {3}));
    MPI_CHECK(throws(
        [&] {
          over.output_spec(ShardSpec({1, 2, 2}, {Replicate(), Replicate(), Shard(0)}, mesh));
        },
        "output extent of -2"));
  }
  ConvTransposeNd layer(tconv(1, 2, 2, {2}, {2}, {0}));
  const ShardTensor bad = ShardTensor::scatter(mesh, test::random_tensor({1, 3, 6}, DType::f32, 1),
                                               {Replicate(), Replicate(), Shard(0)});
  MPI_CHECK(throws([&] { layer.forward(bad); }, "channels"));
  const ShardTensor x = ShardTensor::scatter(mesh, test::random_tensor({1, 2, 6}, DType::f32, 1),
                                             {Replicate(), Replicate(), Shard(0)});
  layer.forward(x);
  MPI_CHECK(throws([&] { layer.backward(x); }, "differs from the output"));
}
