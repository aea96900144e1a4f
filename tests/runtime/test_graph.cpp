// Layer graph: forward and backward of a UNet-shaped DAG (residual addition, channel
// concatenation, values fanning out to two consumers) on sharded tensors, against a
// direct float64 evaluation of the same function and central finite differences, on
// 1-D, 2-D, 3-D and domain x data meshes; a hand-computed case; gradient sync hooks.
#include <algorithm>
#include <cmath>
#include <memory>
#include <random>

#include "runtime/comm/grad_sync.hpp"
#include "runtime/nn/graph.hpp"
#include "tests/harness/mpi_test.hpp"
#include "tests/support/expect_error.hpp"
#include "tests/support/helpers.hpp"
#include "tests/support/toy_layers.hpp"

using namespace tessera;
using test::ChannelMix;
using test::ChannelScale;

namespace {

// A full (N, C, H, W) float64 array for the direct reference.
struct Full {
  Index n, c, h, w;
  std::vector<double> v;
  Full(Index n_, Index c_, Index h_, Index w_)
      : n(n_), c(c_), h(h_), w(w_), v(n_ * c_ * h_ * w_, 0.0) {}
  double& at(Index i, Index k, Index s) {
    return v[static_cast<std::size_t>((i * c + k) * h * w + s)];
  }
  double at(Index i, Index k, Index s) const {
    return v[static_cast<std::size_t>((i * c + k) * h * w + s)];
  }
};

struct Params {
  Index c0 = 2, c1 = 3, cout = 2;
  std::vector<double> W1, b1, s1, W2, b2, W3, b3;
};

Full mix(const Full& x, Index cout, const std::vector<double>& W, const std::vector<double>& b) {
  Full y(x.n, cout, x.h, x.w);
  for (Index i = 0; i < x.n; ++i)
    for (Index o = 0; o < cout; ++o)
      for (Index s = 0; s < x.h * x.w; ++s) {
        double acc = b[static_cast<std::size_t>(o)];
        for (Index k = 0; k < x.c; ++k)
          acc += W[static_cast<std::size_t>(o * x.c + k)] * x.at(i, k, s);
        y.at(i, o, s) = acc;
      }
  return y;
}

// The function the graph computes, written out directly.
Full reference_forward(const Full& x, const Params& p) {
  const Full e1 = mix(x, p.c1, p.W1, p.b1);
  Full e2 = e1;
  for (Index i = 0; i < x.n; ++i)
    for (Index k = 0; k < p.c1; ++k)
      for (Index s = 0; s < x.h * x.w; ++s)
        e2.at(i, k, s) = p.s1[static_cast<std::size_t>(k)] * e1.at(i, k, s);
  Full r = mix(e2, p.c1, p.W2, p.b2);
  for (std::size_t q = 0; q < r.v.size(); ++q) r.v[q] += e1.v[q];
  Full cat(x.n, 2 * p.c1, x.h, x.w);
  for (Index i = 0; i < x.n; ++i)
    for (Index k = 0; k < p.c1; ++k)
      for (Index s = 0; s < x.h * x.w; ++s) {
        cat.at(i, k, s) = r.at(i, k, s);
        cat.at(i, p.c1 + k, s) = e2.at(i, k, s);
      }
  return mix(cat, p.cout, p.W3, p.b3);
}

double dot(const Full& a, const std::vector<double>& r) {
  double s = 0;
  for (std::size_t q = 0; q < a.v.size(); ++q) s += a.v[q] * r[q];
  return s;
}

std::vector<double> randoms(std::mt19937& rng, std::size_t n) {
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<double> v(n);
  for (auto& e : v) e = u(rng);
  return v;
}

struct Net {
  Graph g;
  Value x, e1, e2, m, r, cat, out;
};

std::unique_ptr<Net> build(const Params& p) {
  auto net = std::make_unique<Net>();
  Graph& g = net->g;
  net->x = g.input("x");
  net->e1 = g.layer("enc1.mix", std::make_shared<ChannelMix>(p.c0, p.c1, p.W1, p.b1), net->x);
  net->e2 = g.layer("enc1.scale", std::make_shared<ChannelScale>(p.s1), net->e1);
  net->m = g.layer("mid.mix", std::make_shared<ChannelMix>(p.c1, p.c1, p.W2, p.b2), net->e2);
  net->r = g.add("mid.residual", net->m, net->e1);
  net->cat = g.concat("dec1.skip", net->r, net->e2);
  net->out =
      g.layer("dec1.mix", std::make_shared<ChannelMix>(2 * p.c1, p.cout, p.W3, p.b3), net->cat);
  g.output(net->out);
  return net;
}

Tensor to_tensor(const Full& f) {
  Tensor t = Tensor::empty({f.n, f.c, f.h, f.w}, DType::f64);
  for (Index i = 0; i < t.numel(); ++i) t.data<double>()[i] = f.v[static_cast<std::size_t>(i)];
  return t;
}

// Placements of (N, C, H, W) on each test mesh: spatial dims on the domain-like axes,
// the batch on a data axis or a third axis.
std::vector<Placement> placements_for(const Mesh& mesh) {
  if (mesh.names().back() == "data") return {Shard(1), Replicate(), Shard(0), Replicate()};
  if (mesh.ndim() == 1) return {Replicate(), Replicate(), Shard(0), Replicate()};
  if (mesh.ndim() == 2) return {Replicate(), Replicate(), Shard(0), Shard(1)};
  return {Shard(0), Replicate(), Shard(1), Shard(2)};
}

double max_abs_diff(const Tensor& a, const std::vector<double>& b) {
  double m = 0;
  for (Index i = 0; i < a.numel(); ++i)
    m = std::max(m, std::abs(a.data<double>()[i] - b[static_cast<std::size_t>(i)]));
  return m;
}

}  // namespace

TEST_CASE("graph forward/backward equal the direct function and finite differences", "[graph]") {
  std::mt19937 rng(11);
  Params p;
  p.W1 = randoms(rng, 6), p.b1 = randoms(rng, 3), p.s1 = randoms(rng, 3);
  p.W2 = randoms(rng, 9), p.b2 = randoms(rng, 3), p.W3 = randoms(rng, 12), p.b3 = randoms(rng, 2);
  Full x(3, 2, 5, 6);
  x.v = randoms(rng, x.v.size());
  const std::vector<double> R = randoms(rng, static_cast<std::size_t>(3 * 2 * 5 * 6));
  const Full y_ref = reference_forward(x, p);

  // Central differences of L = <f(x), R> for every parameter and input element.
  const double h = 1e-5;
  auto fd = [&](double& slot) {
    const double keep = slot;
    slot = keep + h;
    const double lp = dot(reference_forward(x, p), R);
    slot = keep - h;
    const double lm = dot(reference_forward(x, p), R);
    slot = keep;
    return (lp - lm) / (2 * h);
  };
  std::map<std::string, std::vector<double>> fd_grads;
  auto fd_all = [&](const std::string& name, std::vector<double>& v) {
    for (double& e : v) fd_grads[name].push_back(fd(e));
  };
  fd_all("enc1.mix.weight", p.W1), fd_all("enc1.mix.bias", p.b1), fd_all("enc1.scale.weight", p.s1);
  fd_all("mid.mix.weight", p.W2), fd_all("mid.mix.bias", p.b2);
  fd_all("dec1.mix.weight", p.W3), fd_all("dec1.mix.bias", p.b3);
  std::vector<double> fd_dx;
  for (double& e : x.v) fd_dx.push_back(fd(e));

  int cases = 0;
  for (const Mesh& mesh : test::test_meshes(MPI_COMM_WORLD)) {
    for (bool use_sync : {false, true}) {
      INFO("mesh " << mesh.str() << (use_sync ? " with GradSync" : " with sync_grads"));
      auto net = build(p);
      Graph& g = net->g;
      const auto dims = placements_for(mesh);
      const ShardTensor xs = ShardTensor::scatter(mesh, to_tensor(x), dims);
      const ShardTensor rs = ShardTensor::scatter(mesh, to_tensor([&] {
                                                    Full f(3, 2, 5, 6);
                                                    f.v = R;
                                                    return f;
                                                  }()),
                                                  dims);
      std::vector<Parameter*> params;
      for (const auto& np : g.parameters()) params.push_back(np.param);
      std::unique_ptr<GradSync> sync;
      std::vector<int> started;  // buckets started after each layer's backward
      if (use_sync) {
        // The layers declare the axes to sum over (those that shard their input).
        sync = std::make_unique<GradSync>(mesh, params, GradSyncOptions{{}, {}, 64});
        g.on_grads_ready([&](const std::vector<Parameter*>& ps) {
          sync->mark_ready(ps);
          started.push_back(sync->buckets_started());
        });
      }
      MPI_REQUIRE(g.output_specs({xs.spec()}).front().global_shape() ==
                  (std::vector<Index>{3, 2, 5, 6}));
      const ShardTensor ys = g.forward(xs);
      MPI_REQUIRE(ys.spec() == g.output_specs({xs.spec()}).front());
      const Tensor y = ys.gather_all();
      MPI_CHECK(max_abs_diff(y, y_ref.v) < 1e-13);

      g.zero_grad();
      const ShardTensor dx = g.backward(rs);
      if (sync) {
        // Overlap: the first layer done (the last in the graph) already started its
        // buckets while the other layers' backward was still to run; all started by the end.
        MPI_CHECK(started.size() == 4);
        MPI_CHECK(started.front() >= 1);
        MPI_CHECK(started.front() < sync->num_buckets());
        MPI_CHECK(std::is_sorted(started.begin(), started.end()));
        MPI_CHECK(started.back() == sync->num_buckets());
        sync->finish();
      }
      std::map<std::string, Tensor> local;  // this rank's contributions, before the sum
      if (!sync) {
        for (const auto& np : g.parameters()) local[np.name] = np.param->grad.clone();
        sync_grads(mesh, params);
      }
      MPI_REQUIRE(dx.spec() == xs.spec());
      MPI_CHECK(max_abs_diff(dx.gather_all(), fd_dx) < 1e-8);
      for (const auto& np : g.parameters()) {
        INFO("parameter " << np.name);
        MPI_CHECK(max_abs_diff(np.param->grad, fd_grads.at(np.name)) < 1e-8);
      }
      // A second backward of the same forward adds the same gradients again.
      if (!sync) {
        std::map<std::string, Tensor> once;
        for (const auto& np : g.parameters()) once[np.name] = np.param->grad.clone();
        for (const auto& np : g.parameters()) np.param->grad.copy_from(local[np.name]);
        const ShardTensor dx2 = g.backward(rs);
        sync_grads(mesh, params);
        MPI_CHECK(test::same(dx2.gather_all(), dx.gather_all()));
        for (const auto& np : g.parameters()) {
          std::vector<double> twice;
          for (Index i = 0; i < once[np.name].numel(); ++i)
            twice.push_back(2 * once[np.name].data<double>()[i]);
          MPI_CHECK(max_abs_diff(np.param->grad, twice) < 1e-13);
        }
      }
      ++cases;
    }
  }
  MPI_REQUIRE(cases >= 2);
}

TEST_CASE("graph gradients on a hand-computed case: residual and concat of one value", "[graph]") {
  // x = [1, 2, 3, 4] as (1, 1, 2, 2); s = scale by w = 3.
  // y1 = s(x) + x = 4x = [4, 8, 12, 16]; with dy1 = 1: dx = w + 1 = 4, dw = sum x = 10.
  // y2 = concat(x, s(x)) = [x, 3x]; with dy2 = [1, 2]: dx = 1 + 2*3 = 7, dw = 2 * 10 = 20.
  const Mesh mesh = Mesh::line(MPI_COMM_WORLD);
  Tensor x = Tensor::empty({1, 1, 2, 2}, DType::f64);
  for (int i = 0; i < 4; ++i) x.data<double>()[i] = i + 1;
  const std::vector<Placement> dims = {Replicate(), Replicate(), Shard(0), Replicate()};
  const ShardTensor xs = ShardTensor::scatter(mesh, x, dims);

  Graph g1;
  const Value in1 = g1.input("x");
  auto scale1 = std::make_shared<ChannelScale>(std::vector<double>{3.0});
  g1.output(g1.add("res", g1.layer("s", scale1, in1), in1));
  const Tensor y1 = g1.forward(xs).gather_all();
  for (int i = 0; i < 4; ++i) MPI_CHECK(y1.data<double>()[i] == 4.0 * (i + 1));
  Tensor ones = Tensor::empty({1, 1, 2, 2}, DType::f64);
  for (int i = 0; i < 4; ++i) ones.data<double>()[i] = 1;
  g1.zero_grad();
  const Tensor dx1 = g1.backward(ShardTensor::scatter(mesh, ones, dims)).gather_all();
  for (int i = 0; i < 4; ++i) MPI_CHECK(dx1.data<double>()[i] == 4.0);
  sync_grads(mesh, {&g1.parameter("s.weight")});
  MPI_CHECK(g1.parameter("s.weight").grad.data<double>()[0] == 10.0);

  Graph g2;
  const Value in2 = g2.input("x");
  auto scale2 = std::make_shared<ChannelScale>(std::vector<double>{3.0});
  g2.output(g2.concat("cat", in2, g2.layer("s", scale2, in2)));
  const ShardTensor y2 = g2.forward(xs);
  MPI_REQUIRE(y2.global_shape() == (std::vector<Index>{1, 2, 2, 2}));
  const Tensor y2f = y2.gather_all();
  for (int i = 0; i < 4; ++i) {
    MPI_CHECK(y2f.data<double>()[i] == i + 1.0);
    MPI_CHECK(y2f.data<double>()[4 + i] == 3.0 * (i + 1));
  }
  Tensor dy2 = Tensor::empty({1, 2, 2, 2}, DType::f64);
  for (int i = 0; i < 8; ++i) dy2.data<double>()[i] = i < 4 ? 1 : 2;
  g2.zero_grad();
  const Tensor dx2 = g2.backward(ShardTensor::scatter(mesh, dy2, y2.spec())).gather_all();
  for (int i = 0; i < 4; ++i) MPI_CHECK(dx2.data<double>()[i] == 7.0);
  sync_grads(mesh, {&g2.parameter("s.weight")});
  MPI_CHECK(g2.parameter("s.weight").grad.data<double>()[0] == 20.0);
}

TEST_CASE("graph: parameter registry names, kept values, and clear errors", "[graph]") {
  Params p;
  p.W1.assign(6, 0.5), p.b1.assign(3, 0.1), p.s1.assign(3, 2.0);
  p.W2.assign(9, 0.25), p.b2.assign(3, 0.0), p.W3.assign(12, -0.5), p.b3.assign(2, 1.0);
  auto net = build(p);
  Graph& g = net->g;
  std::vector<std::string> names;
  for (const auto& np : g.parameters()) names.push_back(np.name);
  MPI_CHECK(names == (std::vector<std::string>{
                         "enc1.mix.weight", "enc1.mix.bias", "enc1.scale.weight", "mid.mix.weight",
                         "mid.mix.bias", "dec1.mix.weight", "dec1.mix.bias"}));
  MPI_CHECK(g.parameter("mid.mix.bias").value.numel() == 3);
  MPI_CHECK_ERROR(g.parameter("mid.mix.nope"), "mid.mix.nope");

  const Mesh mesh = Mesh::line(MPI_COMM_WORLD);
  const Tensor x = test::reference({2, 2, 4, 3}, DType::f64);
  const ShardTensor xs =
      ShardTensor::scatter(mesh, x, {Replicate(), Replicate(), Shard(0), Replicate()});
  MPI_CHECK_ERROR(g.backward(xs), "no forward");
  g.forward(xs);
  MPI_CHECK_ERROR(g.value(net->e1), "not kept");
  g.keep_values(true);
  g.forward(xs);
  MPI_CHECK(g.value(net->cat).global_shape() == (std::vector<Index>{2, 6, 4, 3}));

  // Construction errors name the node.
  Graph bad;
  const Value in = bad.input("x");
  auto layer = std::make_shared<ChannelScale>(std::vector<double>{1.0, 1.0});
  bad.layer("a", layer, in);
  MPI_CHECK_ERROR(bad.layer("b", layer, in), "already node 'a'");
  MPI_CHECK_ERROR(bad.input("a"), "named 'a' exists");
  MPI_CHECK_ERROR(bad.concat("c", in, Value{42}), "not a node");

  // A shape the graph cannot take: the error names the node.
  const ShardSpec three(std::vector<Index>{2, 3, 4, 3},
                        {Replicate(), Replicate(), Shard(0), Replicate()}, mesh);
  MPI_CHECK_ERROR(g.output_specs({three}), "enc1.mix");

  // A layer whose result disagrees with its own output_spec is caught at its node.
  struct Liar : ChannelScale {
    Liar() : ChannelScale({1.0, 1.0}) {}
    ShardSpec output_spec(const ShardSpec& in) const override {
      return in.with_placement(2, Replicate());
    }
  };
  Graph liar;
  liar.output(liar.layer("fibber", std::make_shared<Liar>(), liar.input("x")));
  MPI_CHECK_ERROR(liar.forward(xs), "layer node 'fibber' (ChannelScale) returned");

  // Concat refuses a sharded channel dim and mismatched spatial sizes.
  const ShardSpec a({2, 4, 6}, {Replicate(), Shard(0), Replicate()}, mesh);
  const ShardSpec b({2, 4, 6}, {Replicate(), Shard(0), Replicate()}, mesh);
  MPI_CHECK_ERROR(concat_spec(a, b), "channel dim");
  const ShardSpec c({2, 4, 6}, {Replicate(), Replicate(), Shard(0)}, mesh);
  const ShardSpec d({2, 4, 7}, {Replicate(), Replicate(), Shard(0)}, mesh);
  MPI_CHECK_ERROR(concat_spec(c, d), "differ in dim 2");
}

TEST_CASE("graph bind: a model that differs on one rank is named, line and ranks", "[graph]") {
  const Mesh mesh = Mesh::line(MPI_COMM_WORLD);
  const ShardSpec spec(std::vector<Index>{2, 2, 4, 3},
                       {Replicate(), Replicate(), Shard(0), Replicate()}, mesh);
  Params p;
  p.W1.assign(6, 0.5), p.b1.assign(3, 0.1), p.s1.assign(3, 2.0);
  p.W2.assign(9, 0.25), p.b2.assign(3, 0.0), p.W3.assign(12, -0.5), p.b3.assign(2, 1.0);
  MPI_CHECK(test::error_of([&] { build(p)->g.bind(mesh, {spec}); }).empty());
  if (mesh.size() < 2) return;
  // One weight that differs on the last rank (another seed, a restored file it alone read).
  Params q = p;
  if (mesh.rank() == mesh.size() - 1) q.W2[4] = 0.75;
  const std::string e = test::error_of([&] { build(q)->g.bind(mesh, {spec}); });
  MPI_CHECK(test::has(e, "Graph::bind: ranks disagree on the model: "));
  MPI_CHECK(test::has(e, "'mid.mix.weight: float64 (3, 3) value hash"));
  MPI_CHECK(test::has(e, "rank " + std::to_string(mesh.size() - 1) + ": line "));
}

TEST_CASE("graph add redistributes an operand with another spec, forward and backward", "[graph]") {
  const Mesh mesh = Mesh::line(MPI_COMM_WORLD);
  Graph g;
  const Value a = g.input("a"), b = g.input("b");
  g.output(g.add("sum", a, b));
  const Tensor ta = test::reference({2, 2, 5, 3}, DType::f64, 1);
  const Tensor tb = test::reference({2, 2, 5, 3}, DType::f64, 2);
  const ShardTensor sa =
      ShardTensor::scatter(mesh, ta, {Replicate(), Replicate(), Shard(0), Replicate()});
  const ShardTensor sb =
      ShardTensor::scatter(mesh, tb, {Replicate(), Replicate(), Replicate(), Shard(0)});
  const Tensor y = g.forward({sa, sb}).front().gather_all();
  bool ok = true;
  for (Index i = 0; i < y.numel(); ++i)
    ok = ok && y.data<double>()[i] == ta.data<double>()[i] + tb.data<double>()[i];
  MPI_CHECK(ok);
  const auto d = g.backward(std::vector<ShardTensor>{sa});  // dy = a's values
  MPI_REQUIRE(d.size() == 2);
  MPI_CHECK(d[0].spec() == sa.spec());
  MPI_CHECK(d[1].spec() == sb.spec());
  MPI_CHECK(test::same(d[0].gather_all(), ta));
  MPI_CHECK(test::same(d[1].gather_all(), ta));
}

TEST_CASE("graph concat and add in float32 on 2-D meshes are exact", "[graph]") {
  for (const Mesh& mesh : test::test_meshes(MPI_COMM_WORLD)) {
    if (mesh.ndim() != 2) continue;
    Graph g;
    const Value a = g.input("a"), b = g.input("b");
    const Value s = g.add("sum", a, b);
    g.output(g.concat("cat", s, a));
    const std::vector<Placement> dims = {Replicate(), Replicate(), Shard(0), Shard(1)};
    const Tensor ta = test::reference({2, 3, 5, 7}, DType::f32, 1);
    const Tensor tb = test::reference({2, 3, 5, 7}, DType::f32, 2);
    const ShardTensor sa = ShardTensor::scatter(mesh, ta, dims),
                      sb = ShardTensor::scatter(mesh, tb, dims);
    const Tensor y = g.forward({sa, sb}).front().gather_all();
    MPI_REQUIRE(y.shape() == (std::vector<Index>{2, 6, 5, 7}));
    bool ok = true;
    for (Index n = 0; n < 2; ++n)
      for (Index c = 0; c < 3; ++c)
        for (Index i = 0; i < 5; ++i)
          for (Index j = 0; j < 7; ++j) {
            ok = ok && y.at<float>({n, c, i, j}) ==
                           ta.at<float>({n, c, i, j}) + tb.at<float>({n, c, i, j});
            ok = ok && y.at<float>({n, 3 + c, i, j}) == ta.at<float>({n, c, i, j});
          }
    MPI_CHECK(ok);
    // Backward: d(sum) flows to a and b, d(cat second half) to a again.
    const Tensor dy = test::reference({2, 6, 5, 7}, DType::f32, 3);
    const auto d = g.backward(std::vector<ShardTensor>{ShardTensor::scatter(mesh, dy, dims)});
    const Tensor da = d[0].gather_all(), db = d[1].gather_all();
    for (Index n = 0; n < 2; ++n)
      for (Index c = 0; c < 3; ++c)
        for (Index i = 0; i < 5; ++i)
          for (Index j = 0; j < 7; ++j) {
            ok = ok && db.at<float>({n, c, i, j}) == dy.at<float>({n, c, i, j});
            ok = ok && da.at<float>({n, c, i, j}) ==
                           dy.at<float>({n, c, i, j}) + dy.at<float>({n, 3 + c, i, j});
          }
    MPI_CHECK(ok);
    MPI_CHECK(da.dtype() == DType::f32);
  }
}

TEST_CASE("graph forward frees an intermediate once its consumers ran", "[graph]") {
  Params p;
  p.W1.assign(6, 0.5), p.b1.assign(3, 0.1), p.s1.assign(3, 2.0);
  p.W2.assign(9, 0.25), p.b2.assign(3, 0.0), p.W3.assign(12, -0.5), p.b3.assign(2, 1.0);
  const Mesh mesh = Mesh::line(MPI_COMM_WORLD);
  const ShardTensor xs = ShardTensor::scatter(mesh, test::reference({2, 2, 8, 6}, DType::f64),
                                              {Replicate(), Replicate(), Shard(0), Replicate()});
  auto live_after_forward = [&](bool keep) {
    auto net = build(p);
    net->g.keep_values(keep);
    const std::size_t before = memory_stats(MemSpace::Host).current;
    net->g.forward(xs);
    const std::size_t after = memory_stats(MemSpace::Host).current;
    return std::make_pair(after - before, net->g.value(net->out).local().nbytes());
  };
  // Two values are held by no layer once their consumers ran: the output of "mid.mix"
  // (its consumer, the add, keeps nothing) and the residual sum (concat copies it).
  // Layers keep their inputs, so everything else stays alive either way.
  const auto [freed, out_bytes] = live_after_forward(false);
  const auto [kept, unused] = live_after_forward(true);
  (void)out_bytes, (void)unused;
  const std::size_t residual =
      static_cast<std::size_t>(xs.local().numel() / 2 * 3) * sizeof(double);
  INFO("kept " << kept << " freed " << freed << " one 3-channel value " << residual);
  MPI_CHECK(kept - freed == 2 * residual);
}

namespace {
// A two-input op for the test: out = a * b element-wise (same spec), d/da = dy * b,
// d/db = dy * a: each gradient depends on the other input, so the saved state matters.
class Multiply : public Op {
 public:
  ShardSpec output_spec(const std::vector<ShardSpec>& in) const override {
    TESSERA_CHECK(in.size() == 2 && in[0] == in[1], "multiply: two inputs of one spec");
    return in[0];
  }
  ShardTensor forward(const std::vector<ShardTensor>& in) override {
    a_ = in.at(0);
    b_ = in.at(1);
    const Tensor y = a_.local().clone();
    for (Index i = 0; i < y.numel(); ++i)
      y.data<double>()[i] *= b_.local().contiguous().data<double>()[i];
    return ShardTensor::unchecked(a_.mesh(), a_.spec(), y);
  }
  std::vector<ShardTensor> backward(const ShardTensor& dy) override {
    const Tensor g = dy.local().contiguous(), a = a_.local().contiguous(),
                 b = b_.local().contiguous();
    Tensor da = g.clone(), db = g.clone();
    for (Index i = 0; i < g.numel(); ++i) {
      da.data<double>()[i] *= b.data<double>()[i];
      db.data<double>()[i] *= a.data<double>()[i];
    }
    return {ShardTensor::unchecked(dy.mesh(), dy.spec(), da),
            ShardTensor::unchecked(dy.mesh(), dy.spec(), db)};
  }
  std::string name() const override { return "multiply"; }

 private:
  ShardTensor a_, b_;
};
}  // namespace

TEST_CASE("graph op nodes: a multi-input op is scheduled like any other", "[graph]") {
  // y = x * s(x) with s = scale by 3: y = 3 x^2, dy/dx = 6 x, dw = sum x^2 = 30.
  const Mesh mesh = Mesh::line(MPI_COMM_WORLD);
  Tensor x = Tensor::empty({1, 1, 2, 2}, DType::f64);
  for (int i = 0; i < 4; ++i) x.data<double>()[i] = i + 1;
  const std::vector<Placement> dims = {Replicate(), Replicate(), Shard(0), Replicate()};
  const ShardTensor xs = ShardTensor::scatter(mesh, x, dims);
  Graph g;
  const Value in = g.input("x");
  auto scale = std::make_shared<ChannelScale>(std::vector<double>{3.0});
  auto mul = std::make_shared<Multiply>();
  g.output(g.op("mul", mul, {in, g.layer("s", scale, in)}));
  MPI_REQUIRE(g.node_kind(Value{2}) == Graph::Kind::Op);
  MPI_REQUIRE(g.output_specs({xs.spec()}).front() == xs.spec());
  const Tensor y = g.forward(xs).gather_all();
  for (int i = 0; i < 4; ++i) MPI_CHECK(y.data<double>()[i] == 3.0 * (i + 1) * (i + 1));
  Tensor ones = Tensor::empty({1, 1, 2, 2}, DType::f64);
  for (int i = 0; i < 4; ++i) ones.data<double>()[i] = 1;
  g.zero_grad();
  const Tensor dx = g.backward(ShardTensor::scatter(mesh, ones, dims)).gather_all();
  for (int i = 0; i < 4; ++i) MPI_CHECK(dx.data<double>()[i] == 6.0 * (i + 1));
  sync_grads(mesh, {&g.parameter("s.weight")});
  MPI_CHECK(g.parameter("s.weight").grad.data<double>()[0] == 30.0);
  // One op object per node, and clear errors for what an op refuses.
  MPI_REQUIRE(test::has(test::error_of([&] {
                          g.op("mul2", mul, {in, in});
                        }),
                        "already node 'mul'"));
  Graph bad;
  const Value b0 = bad.input("x");
  bad.output(bad.op("mul", std::make_shared<Multiply>(), {b0}));
  MPI_REQUIRE(test::has(test::error_of([&] { bad.output_specs({xs.spec()}); }),
                        "op node 'mul' cannot take its input"));
}

namespace {
// Passes x through and forgets it in backward, as the convolutions free their saved input.
class Forgetful : public Layer {
 public:
  ShardSpec output_spec(const ShardSpec& in) const override { return in; }
  ShardTensor forward(const ShardTensor& x) override {
    saved_ = true;
    return x;
  }
  ShardTensor backward(const ShardTensor& dy) override {
    TESSERA_CHECK(saved_, name() << ": backward before forward");
    saved_ = false;
    return dy;
  }
  std::string name() const override { return "Forgetful"; }

 private:
  bool saved_ = false;
};
}  // namespace

TEST_CASE("graph: a layer shared by two graphs, in two nodes, or run backward twice", "[graph]") {
  // y = w x with w = 2: dw = sum(dy x) = sum(x) for dy = 1.
  const Mesh mesh = Mesh::line(MPI_COMM_WORLD);
  const std::vector<Placement> dims = {Replicate(), Replicate(), Shard(0), Replicate()};
  auto filled = [&](double base, double step) {
    Tensor t = Tensor::empty({1, 1, 4, 2}, DType::f64);
    for (int i = 0; i < 8; ++i) t.data<double>()[i] = base + step * i;
    return ShardTensor::scatter(mesh, t, dims);
  };
  const ShardTensor xa = filled(1.0, 1.0), xb = filled(100.0, 1.0), ones = filled(1.0, 0.0);
  auto shared = std::make_shared<ChannelScale>(std::vector<double>{2.0});
  Graph train, eval;
  train.output(train.layer("enc", shared, train.input("x")));
  eval.output(eval.layer("enc", shared, eval.input("x")));
  Parameter& w = train.parameter("enc.weight");
  auto summed_grad = [&] {
    Tensor g = w.grad.clone();
    MPI_Allreduce(MPI_IN_PLACE, g.data<double>(), 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return g.data<double>()[0];
  };

  // The eval graph's forward between the train graph's forward and backward: the layer
  // holds the eval input now; the backward refuses before adding any gradient.
  train.zero_grad();
  train.forward(xa);
  eval.forward(xb);
  MPI_CHECK_ERROR(train.backward(ones), "node 'enc' (ChannelScale) ran in another graph's forward");
  MPI_CHECK(summed_grad() == 0.0);
  // In order, each graph's backward sees its own input: sum(1..8) = 36, sum(100..107) = 828.
  train.forward(xa);
  train.backward(ones);
  MPI_CHECK(summed_grad() == 36.0);
  train.zero_grad();
  eval.forward(xb);
  train.forward(xa);  // the later forward owns the state
  train.backward(ones);
  MPI_CHECK(summed_grad() == 36.0);
  MPI_CHECK_ERROR(eval.backward(ones), "node 'enc' (ChannelScale) ran in another graph's forward");
  train.zero_grad();
  eval.forward(xb);
  eval.backward(ones);
  MPI_CHECK(summed_grad() == 828.0);

  // One object in two nodes of one graph, as a layer and inside a LayerOp, either order.
  Graph twice;
  const Value in = twice.input("x");
  twice.layer("a", shared, in);
  MPI_CHECK_ERROR(twice.op("b", std::make_shared<LayerOp>(shared), {in}), "already node 'a'");
  Graph twice_op;
  const Value in2 = twice_op.input("x");
  twice_op.op("a", std::make_shared<LayerOp>(shared), {in2});
  MPI_CHECK_ERROR(twice_op.layer("b", shared, in2), "already node 'a'");

  // A second backward of one forward through a layer that frees its state in backward.
  Graph once;
  once.output(once.layer("f", std::make_shared<Forgetful>(), once.input("x")));
  once.forward(xa);
  once.backward(ones);
  MPI_CHECK_ERROR(once.backward(ones), "a second backward of one forward; node 'f' freed");
  once.forward(xa);
  MPI_CHECK(test::same(once.backward(ones).gather_all(), ones.gather_all()));
}
