// Recompute (activation checkpointing, Graph::recompute): every model gives bitwise the same
// output, input gradient, parameter gradients and BatchNorm running statistics with its blocks
// recomputed as without, on 1-D, 2-D and domain x data meshes, in less memory; values shared
// across segments (a block's output feeding the next block and a skip) survive until every
// replay that takes them; the memory estimate follows; misuse is named.
#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>

#include "apps/common/memory_estimate.hpp"
#include "kernels/device/memory.hpp"
#include "runtime/nn/conv_layer.hpp"
#include "runtime/nn/graph.hpp"
#include "runtime/nn/pointwise_layers.hpp"
#include "runtime/train/fno.hpp"
#include "runtime/train/transolver.hpp"
#include "runtime/train/unet.hpp"
#include "runtime/train/vit.hpp"
#include "tests/harness/mpi_test.hpp"
#include "tests/support/expect_error.hpp"
#include "tests/support/have_device.hpp"
#include "tests/support/layer_check.hpp"
#include "tests/support/grid_layouts.hpp"
#include "tests/support/helpers.hpp"
#include "tests/support/random_tensor.hpp"
#include "tests/support/unet_variants.hpp"

using namespace tessera;

namespace {

using test::same;

struct Step {
  Tensor y, dx;
  std::vector<Tensor> grads;
  std::vector<std::vector<double>> running;  // BatchNorm statistics
  std::size_t peak = 0;
  double estimate = 0;  // kept_activation_bytes of the graph's costs
};

using MakeModel = std::function<std::unique_ptr<Model>()>;

// Two training steps (forward, backward), the second measured: a layer's plans and caches
// exist by then in both runs, so the peaks compare what a step holds.
Step run(const MakeModel& make, const Mesh& mesh, const std::vector<Placement>& dims,
         const Tensor& x_full, const Tensor& dy_full, bool recompute,
         MemSpace space = MemSpace::Host) {
  const std::unique_ptr<Model> net = make();
  Graph& g = net->graph();
  g.recompute(recompute);
  const ShardSpec spec(x_full.shape(), dims, mesh);
  g.bind(mesh, {spec});
  const ShardTensor x = ShardTensor::scatter(mesh, x_full.to(space), spec);
  const Tensor dy_in = dy_full.to(space);
  Step s;
  for (int step = 0; step < 2; ++step) {
    g.zero_grad();
    reset_peak_memory(space);
    const std::size_t base = memory_stats(space).current;
    const ShardTensor y = g.forward(x);
    const ShardTensor dx = g.backward(ShardTensor::scatter(mesh, dy_in, y.spec()));
    s.peak = memory_stats(space).peak - base;
    s.y = y.gather_all().to(MemSpace::Host);
    s.dx = dx.gather_all().to(MemSpace::Host);
  }
  for (const auto& p : g.parameters()) s.grads.push_back(p.param->grad.to(MemSpace::Host));
  for (const Model::Buffer& b : net->buffers()) s.running.push_back(b.value);
  s.estimate = app::kept_activation_bytes(g.costs({spec}, DType::f64));
  return s;
}

void check_equal(const Step& a, const Step& b) {
  MPI_CHECK(same(a.y, b.y));
  MPI_CHECK(same(a.dx, b.dx));
  MPI_REQUIRE(a.grads.size() == b.grads.size());
  bool grads = true;
  for (std::size_t i = 0; i < a.grads.size(); ++i) grads = grads && same(a.grads[i], b.grads[i]);
  MPI_CHECK(grads);
  MPI_CHECK(a.running == b.running);
}

// Largest relative difference of two steps' results (device kernels may sum in any order).
double step_difference(const Step& a, const Step& b) {
  double w = std::max(test::rel_error(a.y, b.y), test::rel_error(a.dx, b.dx));
  if (a.grads.size() != b.grads.size()) return 1e300;
  for (std::size_t i = 0; i < a.grads.size(); ++i)
    w = std::max(w, test::rel_error(a.grads[i], b.grads[i]));
  return w;
}

struct ModelCase {
  std::string what;
  MakeModel make;
  std::vector<Index> in_shape, out_shape;
};

std::vector<ModelCase> models(MemSpace space = MemSpace::Host) {
  std::vector<ModelCase> v;
  v.push_back({"unet pool groupnorm",
               [space] {
                 UNetOptions o = test::unet_pool_groupnorm();
                 o.space = space;
                 return std::make_unique<UNet>(o);
               },
               {2, 2, 32, 12},
               {2, 1, 32, 12}});
  v.push_back({"unet strided batchnorm",
               [space] {
                 UNetOptions o = test::unet_strided_batchnorm();
                 o.space = space;
                 return std::make_unique<UNet>(o);
               },
               {2, 1, 32, 12},
               {2, 2, 32, 12}});
  v.push_back({"fno mode-sharded",
               [space] {
                 FnoOptions o;
                 o.width = 6;
                 o.layers = 3;
                 o.modes = {3};
                 o.projection = 8;
                 o.mode_sharded = true;
                 o.dtype = DType::f64;
                 o.space = space;
                 o.seed = 4;
                 return std::make_unique<Fno>(o);
               },
               {2, 1, 16, 12},
               {2, 1, 16, 12}});
  v.push_back({"vit",
               [space] {
                 VitOptions o;
                 o.patch = 2;
                 o.dim = 8;
                 o.heads = 2;
                 o.depth = 2;
                 o.dtype = DType::f64;
                 o.space = space;
                 o.seed = 5;
                 return std::make_unique<Vit>(o);
               },
               {2, 1, 16, 12},
               {2, 1, 16, 12}});
  v.push_back({"transolver",
               [space] {
                 TransolverOptions o;
                 o.nd = 2;
                 o.coordinates = true;
                 o.width = 8;
                 o.heads = 2;
                 o.slices = 4;
                 o.layers = 2;
                 o.dtype = DType::f64;
                 o.space = space;
                 o.seed = 6;
                 return std::make_unique<Transolver>(o);
               },
               {2, 1, 16, 12},
               {2, 1, 16, 12}});
  return v;
}

// y = x, counting its forwards and replays.
class Counting : public Layer {
 public:
  ShardSpec output_spec(const ShardSpec& in) const override { return in; }
  ShardTensor forward(const ShardTensor& x) override {
    ++forwards;
    replays += replay_;
    return ShardTensor::unchecked(x.mesh(), x.spec(), x.local().clone());
  }
  ShardTensor backward(const ShardTensor& dy) override { return dy; }
  std::string name() const override { return "Counting"; }
  void set_replay(bool on) override { replay_ = on; }
  int forwards = 0, replays = 0;

 private:
  bool replay_ = false;
};

}  // namespace

TEST_CASE("Models with recompute == without, bitwise, in less memory", "[recompute]") {
  for (const ModelCase& m : models()) {
    const Tensor x = test::random_tensor(m.in_shape, DType::f64, 3);
    const Tensor dy = test::random_tensor(m.out_shape, DType::f64, 5);
    for (const auto& [mesh, dims] : test::grid_layouts()) {
      INFO(m.what << " on " << mesh.str());
      const Step plain = run(m.make, mesh, dims, x, dy, false);
      const Step again = run(m.make, mesh, dims, x, dy, true);
      check_equal(again, plain);
      INFO("peak bytes with recompute " << again.peak << ", without " << plain.peak
                                        << "; estimates " << again.estimate << ", "
                                        << plain.estimate);
      MPI_CHECK(again.peak < plain.peak);
      MPI_CHECK(again.estimate < plain.estimate);
    }
  }
}

TEST_CASE("Models with recompute on the device == without, in less device memory", "[gpu]") {
  if (!test::have_device()) return;
  for (const ModelCase& m : models(MemSpace::Cuda)) {
    const Tensor x = test::random_tensor(m.in_shape, DType::f64, 3);
    const Tensor dy = test::random_tensor(m.out_shape, DType::f64, 5);
    for (const auto& [mesh, dims] : test::grid_layouts()) {
      INFO(m.what << " on " << mesh.str());
      const Step plain = run(m.make, mesh, dims, x, dy, false, MemSpace::Cuda);
      const Step again = run(m.make, mesh, dims, x, dy, true, MemSpace::Cuda);
      INFO("difference " << step_difference(again, plain) << "; device peaks " << again.peak << ", "
                         << plain.peak);
      MPI_CHECK(step_difference(again, plain) <= 1e-12);
      MPI_REQUIRE(again.running.size() == plain.running.size());
      double running = 0;
      for (std::size_t i = 0; i < plain.running.size(); ++i)
        for (std::size_t c = 0; c < plain.running[i].size(); ++c)
          running = std::max(running, std::abs(again.running[i][c] - plain.running[i][c]) /
                                          std::max(1e-300, std::abs(plain.running[i][c])));
      MPI_CHECK(running <= 1e-12);
      MPI_CHECK(again.peak < plain.peak);
    }
  }
}

TEST_CASE("A value shared by segments and a skip lives until its last replay", "[recompute]") {
  // a -> [seg 0: lin, act] -> b -> [seg 1: lin, add(b)] -> c -> [seg 2: lin(a), add(c)] -> out
  // b feeds segment 1 twice, a feeds segments 0 and 2 (the graph input), c is segment 1's
  // output and segment 2's input.
  const auto build = [](Graph& g) {
    auto lin = [](unsigned seed) {
      return std::shared_ptr<ConvNd>(token_linear(1, 3, 3, DType::f64, MemSpace::Host, seed, ""));
    };
    const Value a = g.input("a");
    g.begin_segment();
    Value b = g.layer("lin0", lin(1), a);
    b = g.layer("act0", std::make_shared<ActivationLayer>(kernels::Activation::GELU), b);
    g.end_segment();
    const Value m = g.layer("mid", lin(4), b);  // outside any segment
    g.begin_segment();
    Value c = g.layer("lin1", lin(2), b);
    c = g.add("add1", c, b);
    g.end_segment();
    g.begin_segment();
    Value d = g.layer("lin2", lin(3), a);
    d = g.add("add2", d, c);
    g.end_segment();
    g.output(g.add("out", d, m));
    g.output(c);  // a segment's value as an output
  };
  const Mesh mesh = Mesh::line(MPI_COMM_WORLD);
  const std::vector<Index> shape{2, 3, 9 * test::world_size() + 1};
  const ShardSpec spec(shape, {Replicate(), Replicate(), Shard(0)}, mesh);
  const ShardTensor x = ShardTensor::scatter(mesh, test::random_tensor(shape, DType::f64, 7), spec);
  const Tensor d0 = test::random_tensor(shape, DType::f64, 8);
  const Tensor d1 = test::random_tensor(shape, DType::f64, 9);
  std::vector<std::vector<Tensor>> results;
  for (bool on : {false, true}) {
    Graph g;
    build(g);
    MPI_CHECK(g.num_segments() == 3);
    g.recompute(on);
    const std::vector<ShardTensor> y = g.forward(std::vector<ShardTensor>{x});
    const std::vector<ShardTensor> dx = g.backward(
        {ShardTensor::scatter(mesh, d0, y[0].spec()), ShardTensor::scatter(mesh, d1, y[1].spec())});
    std::vector<Tensor> r{y[0].gather_all(), y[1].gather_all(), dx[0].gather_all()};
    for (const auto& p : g.parameters()) r.push_back(p.param->grad.clone());
    results.push_back(r);
    if (on)  // the segments' kept inputs are gone: a second backward is refused
      MPI_CHECK_ERROR(g.backward({ShardTensor::scatter(mesh, d0, y[0].spec()),
                                  ShardTensor::scatter(mesh, d1, y[1].spec())}),
                      "second backward of one forward with recompute");
  }
  MPI_REQUIRE(results[0].size() == results[1].size());
  bool equal = true;
  for (std::size_t i = 0; i < results[0].size(); ++i)
    equal = equal && same(results[0][i], results[1][i]);
  MPI_CHECK(equal);
}

TEST_CASE("A segment no gradient reaches is not replayed", "[recompute]") {
  Graph g;
  const Value a = g.input("a");
  auto used = std::make_shared<Counting>(), unused = std::make_shared<Counting>();
  g.begin_segment();
  g.output(g.layer("used", used, a));
  g.end_segment();
  g.begin_segment();
  g.output(g.layer("unused", unused, a));
  g.end_segment();
  g.recompute(true);
  const Mesh mesh = Mesh::line(MPI_COMM_WORLD);
  const std::vector<Index> shape{1, 2, 3 * test::world_size()};
  const ShardTensor x = ShardTensor::scatter(mesh, test::random_tensor(shape, DType::f64, 2),
                                             {Replicate(), Replicate(), Shard(0)});
  const std::vector<ShardTensor> y = g.forward(std::vector<ShardTensor>{x});
  g.backward({y[0], ShardTensor()});  // no gradient for the second output
  MPI_CHECK(used->forwards == 2);
  MPI_CHECK(used->replays == 1);
  MPI_CHECK(unused->forwards == 1);
  MPI_CHECK(unused->replays == 0);
}

TEST_CASE("Ranks that differ in recompute are refused at bind, not hung in backward",
          "[recompute]") {
  if (test::world_size() < 2) return;
  UNet net(test::unet_pool_groupnorm());
  const Mesh mesh = Mesh::line(MPI_COMM_WORLD);
  const ShardSpec spec({1, 2, 8 * test::world_size(), 8},
                       {Replicate(), Replicate(), Shard(0), Replicate()}, mesh);
  net.graph().recompute(mesh.rank() == 0);
  MPI_CHECK_ERROR(net.graph().bind(mesh, {spec}), "recompute");
  net.graph().recompute(true);
  net.graph().bind(mesh, {spec});  // alike: bound
}

TEST_CASE("Recompute segments refuse misuse with clear errors", "[recompute]") {
  Graph g;
  const Value a = g.input("a");
  MPI_CHECK_ERROR(g.end_segment(), "no segment is open");
  g.begin_segment();
  MPI_CHECK_ERROR(g.begin_segment(), "segments do not nest");
  MPI_CHECK_ERROR(g.input("b"), "a segment holds ops only");
  MPI_CHECK_ERROR(g.end_segment(), "holds no node");
  MPI_CHECK(g.num_segments() == 0);
  g.begin_segment();
  const Value y = g.layer("act", std::make_shared<ActivationLayer>(kernels::Activation::ReLU), a);
  g.output(y);
  const Mesh mesh = Mesh::line(MPI_COMM_WORLD);
  const std::vector<Index> shape{1, 1, 4 * test::world_size()};
  const ShardTensor x = ShardTensor::scatter(mesh, test::random_tensor(shape, DType::f64, 1),
                                             {Replicate(), Replicate(), Shard(0)});
  MPI_CHECK_ERROR(g.forward(x), "is still open");
  g.end_segment();
  MPI_CHECK(g.num_segments() == 1);
  g.recompute(true);
  // Without gradients nothing is kept for a replay, and backward refuses as always.
  g.set_grad_enabled(false);
  const ShardTensor out = g.forward(x);
  MPI_CHECK_ERROR(g.backward(out), "without gradients");
}
