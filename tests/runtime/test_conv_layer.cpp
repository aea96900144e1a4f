#include <random>

#include "runtime/nn/conv_layer.hpp"
#include "tests/harness/mpi_test.hpp"
#include "tests/support/conv_sweep.hpp"
#include "tests/support/helpers.hpp"
#include "tests/support/layer_check.hpp"

using namespace tessera;

namespace {

struct ConvCase {
  std::string label;
  ConvOptions o;
  std::vector<Index> shape;  // (N, C, spatial...)
};

ConvOptions conv(int nd, Index cin, Index cout, std::vector<Index> k, std::vector<Index> s,
                 std::vector<Index> pad, std::vector<Index> dil = {1}, Index groups = 1,
                 PaddingMode mode = PaddingMode::Zeros, std::vector<Index> pad_hi = {}) {
  ConvOptions o;
  o.nd = nd;
  o.in_channels = cin;
  o.out_channels = cout;
  o.kernel = k;
  o.stride = s;
  o.padding = pad;
  o.padding_hi = pad_hi;
  o.dilation = dil;
  o.groups = groups;
  o.padding_mode = mode;
  o.seed = 3;
  return o;
}

const auto Circ = PaddingMode::Circular;
const auto Zero = PaddingMode::Zeros;
const auto Refl = PaddingMode::Reflect;
const auto Repl = PaddingMode::Replicate;

// The cases of the issue, each a test: stride 2 with kernel 3, even kernels, dilation 2,
// circular padding, groups, asymmetric padding, 1x1 stride 2 (cells no window reads),
// halos wider than thin shards (small extents), empty output shards (stride 3), 2-D, 3-D.
std::vector<ConvCase> conv_cases() {
  std::vector<ConvCase> c;
  c.push_back({"1d k3 s1 p1", conv(1, 2, 3, {3}, {1}, {1}), {2, 2, 13}});
  c.push_back({"1d k3 s2 p1", conv(1, 2, 3, {3}, {2}, {1}), {1, 2, 14}});
  c.push_back({"1d k4 s1 p1/2", conv(1, 2, 2, {4}, {1}, {1}, {1}, 1, Zero, {2}), {1, 2, 11}});
  c.push_back({"1d k3 d2 p2", conv(1, 2, 2, {3}, {1}, {2}, {2}), {1, 2, 12}});
  c.push_back(
      {"1d k5 d2 valid (halo 8 > thin shards)", conv(1, 1, 2, {5}, {1}, {0}, {2}), {1, 1, 15}});
  c.push_back({"1d k3 s3 (empty output shards)", conv(1, 2, 2, {3}, {3}, {0}), {1, 2, 9}});
  c.push_back({"1d k1 s2 (unread cells)", conv(1, 3, 2, {1}, {2}, {0}), {1, 3, 9}});
  c.push_back({"1d circular k3 p1", conv(1, 2, 2, {3}, {1}, {1}, {1}, 1, Circ), {1, 2, 10}});
  c.push_back({"1d circular k4 p2/1", conv(1, 1, 2, {4}, {1}, {2}, {1}, 1, Circ, {1}), {1, 1, 9}});
  c.push_back({"1d circular k3 s2 d2 p2", conv(1, 2, 1, {3}, {2}, {2}, {2}, 1, Circ), {1, 2, 12}});
  c.push_back({"1d groups 2", conv(1, 4, 6, {3}, {1}, {1}, {1}, 2), {1, 4, 10}});
  c.push_back({"2d k3 s2 p1", conv(2, 2, 3, {3}, {2}, {1}), {1, 2, 9, 10}});
  c.push_back({"2d k2x3 s2x1 d1x2", conv(2, 2, 2, {2, 3}, {2, 1}, {0, 2}, {1, 2}), {2, 2, 8, 9}});
  c.push_back(
      {"2d circular k3 p1 groups 2", conv(2, 2, 4, {3}, {1}, {1}, {1}, 2, Circ), {1, 2, 7, 8}});
  c.push_back({"3d k3 p1 s1x2x1", conv(3, 2, 2, {3}, {1, 2, 1}, {1}), {1, 2, 6, 7, 5}});
  c.push_back({"3d k2 s2 (patchify)", conv(3, 1, 2, {2}, {2}, {0}), {1, 1, 6, 4, 8}});
  // Reflect and replicate padding (a Pad first), replicate wider than the window span.
  c.push_back({"1d reflect k3 p1", conv(1, 2, 2, {3}, {1}, {1}, {1}, 1, Refl), {1, 2, 11}});
  c.push_back(
      {"1d replicate k5 s2 p3/1", conv(1, 2, 3, {5}, {2}, {3}, {1}, 1, Repl, {1}), {1, 2, 10}});
  c.push_back(
      {"2d reflect k3 d2 p2 groups 2", conv(2, 2, 4, {3}, {1}, {2}, {2}, 2, Refl), {1, 2, 7, 8}});
  c.push_back({"2d replicate k3 p4 (wider than the span)",
               conv(2, 1, 2, {3}, {1}, {4}, {1}, 1, Repl),
               {1, 1, 5, 6}});
  c.push_back({"3d reflect k3 p1", conv(3, 2, 2, {3}, {1}, {1}, {1}, 1, Refl), {1, 2, 5, 4, 6}});
  // Zero padding as wide as the span (windows wholly in padding: outputs = the bias).
  c.push_back({"1d zeros k3 p4/5 (wider than the span)",
               conv(1, 2, 2, {3}, {1}, {4}, {1}, 1, Zero, {5}),
               {1, 2, 6}});
  c.push_back({"2d zeros k2 s2 d2 p0x3 (as wide as the span)",
               conv(2, 1, 2, {2}, {2}, {0, 3}, {2}),
               {1, 1, 5, 6}});
  return c;
}

// Naive float64 conv on the full tensor (zero, circular, reflect or replicate padding, as
// PyTorch's padding_mode indexes): the independent reference for the one-rank layer.
Tensor naive_conv(const ConvCase& c, const Tensor& x, const Tensor& w, const Tensor& b) {
  const ConvOptions& o = c.o;
  const int nd = o.nd;
  std::vector<Index> k(3, 1), s(3, 1), dl(3, 1), p(3, 0), n(3, 1), out(3, 1);
  auto at = [](const std::vector<Index>& v, int d) { return v.size() == 1 ? v[0] : v[d]; };
  std::vector<Index> yshape = {x.shape(0), o.out_channels};
  for (int d = 0; d < nd; ++d) {
    k[d] = at(o.kernel, d);
    s[d] = at(o.stride, d);
    dl[d] = at(o.dilation, d);
    p[d] = at(o.padding, d);
    const Index phi = o.padding_hi.empty() ? p[d] : at(o.padding_hi, d);
    n[d] = x.shape(2 + d);
    out[d] = (n[d] + p[d] + phi - dl[d] * (k[d] - 1) - 1) / s[d] + 1;
    yshape.push_back(out[d]);
  }
  Tensor y = Tensor::zeros(yshape, DType::f64);
  const Tensor yv = y.reshape({x.shape(0), o.out_channels, out[0], out[1], out[2]});
  const Tensor xv = x.reshape({x.shape(0), o.in_channels, n[0], n[1], n[2]});
  const Tensor wv = w.reshape({o.out_channels, o.in_channels / o.groups, k[0], k[1], k[2]});
  const Index cig = o.in_channels / o.groups, cog = o.out_channels / o.groups;
  for (Index bn = 0; bn < x.shape(0); ++bn)
    for (Index co = 0; co < o.out_channels; ++co)
      for (Index i0 = 0; i0 < out[0]; ++i0)
        for (Index i1 = 0; i1 < out[1]; ++i1)
          for (Index i2 = 0; i2 < out[2]; ++i2) {
            double acc = b.defined() ? b.data<double>()[co] : 0.0;
            for (Index ci = 0; ci < cig; ++ci)
              for (Index j0 = 0; j0 < k[0]; ++j0)
                for (Index j1 = 0; j1 < k[1]; ++j1)
                  for (Index j2 = 0; j2 < k[2]; ++j2) {
                    Index q[3] = {i0 * s[0] - p[0] + j0 * dl[0], i1 * s[1] - p[1] + j1 * dl[1],
                                  i2 * s[2] - p[2] + j2 * dl[2]};
                    bool inside = true;
                    for (int d = 0; d < 3; ++d) {
                      if (q[d] >= 0 && q[d] < n[d]) continue;
                      if (o.padding_mode == PaddingMode::Circular)
                        q[d] = ((q[d] % n[d]) + n[d]) % n[d];
                      else if (o.padding_mode == PaddingMode::Reflect)
                        q[d] = q[d] < 0 ? -q[d] : 2 * (n[d] - 1) - q[d];
                      else if (o.padding_mode == PaddingMode::Replicate)
                        q[d] = q[d] < 0 ? 0 : n[d] - 1;
                      else
                        inside = false;
                    }
                    if (!inside) continue;
                    acc += wv.at<double>({co, ci, j0, j1, j2}) *
                           xv.at<double>({bn, (co / cog) * cig + ci, q[0], q[1], q[2]});
                  }
            yv.at<double>({bn, co, i0, i1, i2}) = acc;
          }
  return y;
}

std::unique_ptr<Layer> make_conv(const ConvOptions& o) {
  return std::make_unique<ConvNd>(o);
}

void run_cases(const std::vector<ConvCase>& cases, DType dt, double tol, int trials_per_mesh) {
  test::sweep_conv_cases(
      cases, dt, tol, trials_per_mesh, 23, 100,
      [](ConvOptions& o, int k) -> std::string {
        o.overlap = k % 3 == 1;
        return o.overlap ? " overlap" : "";
      },
      make_conv);
}

}  // namespace

TEST_CASE("One-rank conv equals a naive float64 conv", "[conv][full]") {
  test::check_one_rank_naive<ConvNd>(conv_cases(), naive_conv);
}

TEST_CASE("Sharded conv equals one-rank conv, float64, forward and gradients", "[conv][full]") {
  run_cases(conv_cases(), DType::f64, 1e-11, 2);
}

TEST_CASE("Sharded conv equals one-rank conv, float32", "[conv][full]") {
  run_cases(test::subset(conv_cases(), {1, 2, 7, 11, 13, 14, 16, 19}), DType::f32, 1e-5, 1);
}

TEST_CASE("Sharded conv, subset for many ranks", "[conv][subset]") {
  run_cases(test::subset(conv_cases(), {1, 4, 5, 8, 12, 14, 17, 18, 21, 22}), DType::f64, 1e-11, 2);
}

TEST_CASE("Conv gradients match finite differences on one rank", "[conv][full][subset]") {
  test::check_finite_differences<ConvNd>(
      test::subset(conv_cases(), {1, 2, 3, 8, 10, 13, 14, 16, 17, 18, 19, 21, 22}), 31);
}

TEST_CASE("Conv rejects bad parameters and mismatched inputs with clear errors",
          "[conv][full][subset]") {
  const auto& throws = test::throws_with;
  MPI_CHECK(throws([] { ConvNd(conv(2, 3, 4, {3}, {1}, {1}, {1}, 2)); }, "groups"));
  MPI_CHECK(throws([] { ConvNd(conv(2, 2, 2, {0}, {1}, {0})); }, "kernel"));
  MPI_CHECK(throws([] { ConvNd(conv(2, 2, 2, {3}, {1}, {-1})); }, "padding"));
  {
    // Reflect padding as wide as the extent: refused on every rank, as PyTorch does.
    ConvNd wide(conv(1, 1, 1, {3}, {1}, {4}, {1}, 1, Refl));
    const Mesh m = Mesh::line(MPI_COMM_WORLD);
    MPI_CHECK(throws(
        [&] {
          wide.output_spec(ShardSpec({1, 1, 4}, {Replicate(), Replicate(), Shard(0)}, m));
        },
        "narrower than the extent"));
  }
  MPI_CHECK(throws([] { ConvNd(conv(2, 2, 2, {3, 3, 3}, {1}, {1})); }, "kernel needs 1 or 2"));
  MPI_CHECK(throws([] { ConvNd(conv(4, 2, 2, {3}, {1}, {1})); }, "1 to 3 spatial"));
  const Mesh mesh = Mesh::line(MPI_COMM_WORLD);
  ConvNd layer(conv(1, 2, 2, {3}, {1}, {1}));
  auto x_of = [&](std::vector<Index> shape, std::vector<Placement> dims, DType dt) {
    return ShardTensor::scatter(mesh, test::random_tensor(shape, dt, 1), dims);
  };
  const std::vector<Placement> along_length = {Replicate(), Replicate(), Shard(0)};
  MPI_CHECK(throws([&] { layer.forward(x_of({1, 3, 8}, along_length, DType::f32)); }, "channels"));
  MPI_CHECK(throws([&] { layer.forward(x_of({1, 2, 8}, along_length, DType::f64)); }, "float64"));
  MPI_CHECK(throws(
      [&] {
        layer.forward(
            x_of({1, 2, 8, 8}, {Replicate(), Replicate(), Shard(0), Replicate()}, DType::f32));
      },
      "spatial dims"));
  ConvNd valid(conv(1, 2, 2, {5}, {1}, {0}));
  MPI_CHECK(throws(
      [&] {
        valid.forward(x_of({1, 2, 3}, along_length, DType::f32));
      },
      "window span"));
  if (mesh.size() > 1)
    MPI_CHECK(throws(
        [&] {
          layer.forward(
              x_of({1, 2 * mesh.size(), 8}, {Replicate(), Shard(0), Replicate()}, DType::f32));
        },
        "channel"));
  ConvNd fresh(conv(1, 2, 2, {3}, {1}, {1}));
  MPI_CHECK(throws(
      [&] {
        fresh.backward(x_of({1, 2, 8}, along_length, DType::f32));
      },
      "backward without a forward"));
  const ShardTensor y = layer.forward(x_of({1, 2, 8}, along_length, DType::f32));
  MPI_CHECK(throws(
      [&] {
        layer.backward(x_of({1, 2, 9}, along_length, DType::f32));
      },
      "differs from the output"));
}
