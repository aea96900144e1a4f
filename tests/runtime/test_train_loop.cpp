// A whole training step on the runtime (layer graph with skip connections, global
// loss, bucketed gradient sync overlapped with backward, clipping, AdamW with a cosine
// schedule), 20 steps: the loss curve and final parameters of every sharded run (1-D
// domain mesh; domain x data mesh with the matching global batch; per-replica loss
// with averaged gradients) equal a one-rank run to 1e-9 relative in float64.
#include <cmath>
#include <memory>
#include <random>

#include "runtime/comm/grad_sync.hpp"
#include "runtime/nn/graph.hpp"
#include "runtime/train/loss.hpp"
#include "runtime/train/optim.hpp"
#include "tests/harness/mpi_test.hpp"
#include "tests/support/toy_layers.hpp"

using namespace tessera;

namespace {

constexpr Index kSamples = 8, kBatch = 4, kH = 7, kW = 5;
constexpr int kSteps = 20;

std::vector<double> randoms(std::mt19937& rng, std::size_t n, double scale) {
  std::uniform_real_distribution<double> u(-scale, scale);
  std::vector<double> v(n);
  for (auto& e : v) e = u(rng);
  return v;
}

std::unique_ptr<Graph> make_model() {
  std::mt19937 rng(1234);  // same initial parameters on every rank and run
  auto g = std::make_unique<Graph>();
  const Value x = g->input("x");
  const Value e1 = g->layer(
      "enc.mix",
      std::make_shared<test::ChannelMix>(2, 4, randoms(rng, 8, 0.7), randoms(rng, 4, 0.1)), x);
  const Value e2 =
      g->layer("enc.scale", std::make_shared<test::ChannelScale>(randoms(rng, 4, 1.0)), e1);
  const Value m = g->layer(
      "mid.mix",
      std::make_shared<test::ChannelMix>(4, 4, randoms(rng, 16, 0.5), randoms(rng, 4, 0.1)), e2);
  const Value r = g->add("mid.res", m, e1);
  const Value cat = g->concat("dec.skip", r, e2);
  g->output(g->layer(
      "dec.mix",
      std::make_shared<test::ChannelMix>(8, 1, randoms(rng, 8, 0.4), randoms(rng, 1, 0.1)), cat));
  return g;
}

// Sample s: input (2, H, W) and target (1, H, W), smooth and deterministic.
Tensor batch(Index first, bool target) {
  const Index c = target ? 1 : 2;
  Tensor t = Tensor::empty({kBatch, c, kH, kW}, DType::f64);
  for (Index b = 0; b < kBatch; ++b) {
    const Index s = (first + b) % kSamples;
    for (Index k = 0; k < c; ++k)
      for (Index i = 0; i < kH; ++i)
        for (Index j = 0; j < kW; ++j) {
          const double x = static_cast<double>(i) / kH, y = static_cast<double>(j) / kW;
          const double a =
              std::sin(3 * x + static_cast<double>(s)) * std::cos(2 * y + static_cast<double>(k));
          t.at<double>({b, k, i, j}) = target ? 1.5 + a * std::sin(static_cast<double>(s) + x * y)
                                              : a + 0.1 * static_cast<double>(k);
        }
  }
  return t;
}

struct Run {
  std::vector<double> losses;
  std::vector<Tensor> params;
};

// dims: placements of (N, C, H, W); loss_axes: mesh axes of the loss (empty: all);
// mean_axes: axes whose gradients are averaged (the rest that shard data are summed).
Run train(const Mesh& mesh, const std::vector<Placement>& dims, const std::vector<int>& loss_axes,
          const std::vector<int>& mean_axes) {
  auto g = make_model();
  const auto named = g->parameters();
  std::vector<Parameter*> ps;
  for (const auto& np : named) ps.push_back(np.param);
  std::vector<int> sum_axes;
  for (const Placement& p : dims)
    if (p.sharded() && std::find(mean_axes.begin(), mean_axes.end(), p.axis) == mean_axes.end())
      sum_axes.push_back(p.axis);
  GradSync sync(mesh, ps, GradSyncOptions{sum_axes, mean_axes, 256});
  g->on_grads_ready([&](const std::vector<Parameter*>& ready) { sync.mark_ready(ready); });
  AdamW opt(named, AdamOptions{2e-2, 0.9, 0.999, 1e-8, 0.01});
  LrSchedule sched;
  sched.kind = LrSchedule::Kind::Cosine;
  sched.base_lr = 2e-2;
  sched.warmup_steps = 3;
  sched.total_steps = kSteps;
  Loss loss(LossKind::RelativeL2, LossOptions{loss_axes});
  Run run;
  for (int step = 0; step < kSteps; ++step) {
    const Index first = (step * kBatch) % kSamples;
    const ShardTensor x = ShardTensor::scatter(mesh, batch(first, false), dims);
    const ShardTensor y = ShardTensor::scatter(mesh, batch(first, true), dims);
    opt.zero_grad();
    const ShardTensor pred = g->forward(x);
    const LossResult l = loss(pred, y);
    g->backward(l.grad);
    sync.finish();
    clip_grad_norm(named, 0.5);
    opt.set_lr(sched.lr(step));
    opt.step();
    // The logged loss: the global value (per-replica values averaged over data).
    double v = l.value;
    if (!mean_axes.empty()) {
      AxesComm data(mesh, mean_axes);
      MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_DOUBLE, MPI_SUM, data.comm());
      v /= data.size();
    }
    run.losses.push_back(v);
  }
  for (const auto& np : named) run.params.push_back(np.param->value.clone());
  return run;
}

double rel_diff(double a, double b) {
  return std::abs(a - b) / std::max(std::abs(b), 1e-300);
}

}  // namespace

TEST_CASE("training runs on 1, 2, 3, 4 ranks and on domain x data meshes give one loss curve",
          "[train]") {
  int P = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  const Mesh self(MPI_COMM_SELF, {1}, {"domain"});
  const Run ref = train(self, {Replicate(), Replicate(), Shard(0), Replicate()}, {}, {});
  // The loss falls: the runtime trains.
  MPI_REQUIRE(ref.losses.back() < 0.5 * ref.losses.front());

  struct Case {
    Mesh mesh;
    std::vector<Placement> dims;
    std::vector<int> loss_axes, mean_axes;
    std::string what;
  };
  std::vector<Case> cases;
  cases.push_back({Mesh::line(MPI_COMM_WORLD),
                   {Replicate(), Replicate(), Shard(0), Replicate()},
                   {},
                   {},
                   "H on domain"});
  const Mesh grid = Mesh::for_grid(MPI_COMM_WORLD, {kH, kW}, {"x", "y"});
  cases.push_back(
      {grid, {Replicate(), Replicate(), Shard(0), Shard(1)}, {}, {}, "H, W on a 2-D mesh"});
  if (P % 2 == 0) {
    const Mesh dd(MPI_COMM_WORLD, {P / 2, 2}, {"domain", "data"});
    cases.push_back({dd,
                     {Shard(1), Replicate(), Shard(0), Replicate()},
                     {},
                     {},
                     "domain x data, global loss, summed"});
    cases.push_back({dd,
                     {Shard(1), Replicate(), Shard(0), Replicate()},
                     {0},
                     {1},
                     "domain x data, per-replica loss, averaged"});
  }
  for (const Case& c : cases) {
    INFO(c.what << " on " << c.mesh.str());
    const Run run = train(c.mesh, c.dims, c.loss_axes, c.mean_axes);
    double worst = 0;
    for (int s = 0; s < kSteps; ++s)
      worst = std::max(worst, rel_diff(run.losses[static_cast<std::size_t>(s)],
                                       ref.losses[static_cast<std::size_t>(s)]));
    INFO("worst relative loss difference " << worst);
    MPI_CHECK(worst < 1e-9);
    double pworst = 0;
    for (std::size_t k = 0; k < ref.params.size(); ++k)
      for (Index i = 0; i < ref.params[k].numel(); ++i)
        pworst = std::max(
            pworst, std::abs(run.params[k].data<double>()[i] - ref.params[k].data<double>()[i]));
    INFO("worst parameter difference " << pworst);
    MPI_CHECK(pworst < 1e-9);
  }
}
