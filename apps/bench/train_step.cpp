#include "apps/bench/train_step.hpp"

#include "runtime/comm/halo_exchange.hpp"

#include <algorithm>
#include <chrono>
#include <random>
#include <thread>

#include "apps/bench/mpi_counters.hpp"
#include "apps/bench/timing.hpp"
#include "kernels/device/memory.hpp"
#include "runtime/comm/comm_timers.hpp"
#include "runtime/comm/grad_sync.hpp"
#include "runtime/train/loss.hpp"
#include "runtime/train/optim.hpp"
#include "decomp/error.hpp"
#include "runtime/train/fno.hpp"
#include "runtime/train/transolver.hpp"
#include "runtime/train/vit.hpp"
#include "runtime/train/unet.hpp"

namespace tessera::bench {
namespace {

Tensor random_local(const std::vector<Index>& shape, unsigned seed) {
  Tensor t = Tensor::empty(shape, DType::f32);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  for (Index i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(rng);
  return t;
}

std::unique_ptr<Model> make(const StepSetup& s) {
  if (s.model == "fno") {
    FnoOptions f;
    f.width = s.width;
    f.layers = s.depth;
    f.modes = {s.modes};
    f.projection = 2 * s.width;
    f.mode_sharded = s.fno_weights == "mode_sharded";
    return std::make_unique<Fno>(f);
  }
  if (s.model == "transolver") {
    TransolverOptions t;
    t.nd = 2;
    t.coordinates = true;
    t.width = s.width;
    t.layers = s.depth;
    t.heads = 4;
    t.slices = s.slices;
    return std::make_unique<Transolver>(t);
  }
  if (s.model == "vit") {
    VitOptions v;
    v.patch = 4;
    v.dim = s.width;
    v.depth = s.depth;
    v.heads = 4;
    v.attention = sequence_algorithm_from_name(s.attention);
    v.learned_positions = s.vit_positions == "learned";
    for (Index g : s.grid) v.position_grid.push_back(g / v.patch);
    return std::make_unique<Vit>(v);
  }
  if (s.model != "unet")
    throw Error("bench: model '" + s.model + "' is not unet, fno, transolver or vit");
  UNetOptions u;
  u.width = s.width;
  u.depth = s.depth;
  u.groups = 4;
  return std::make_unique<UNet>(u);
}

}  // namespace

struct TrainStepRunner::Impl {
  Mesh mesh;
  std::unique_ptr<Model> model;
  std::unique_ptr<GradSync> sync;
  std::unique_ptr<AdamW> opt;
  Loss loss{LossKind::RelativeL2};
  std::vector<Index> shape;
  ShardTensor x, y;
};

TrainStepRunner::TrainStepRunner(const Mesh& mesh, const StepSetup& s)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.mesh = mesh;
  set_halo_deterministic_default(s.deterministic);  // for the layers built next
  m.model = make(s);
  Model& net = *m.model;
  m.shape = {s.batch, 1, s.grid[0], s.grid[1]};
  const ShardSpec spec(m.shape, {Replicate(), Replicate(), Shard(0), Replicate()}, mesh);
  const auto local_shape = spec.local_shape(mesh.coords());
  const std::string problem = net.input_problem(m.shape);
  if (!problem.empty()) throw Error("bench " + s.model + ": " + problem);

  // The step tessera-train takes (apps/common/trainer.cpp), on random data.
  net.graph().ghost_room(s.ghost_room);
  net.graph().recompute(s.recompute);
  net.graph().bind(mesh, {spec});
  std::vector<Parameter*> ps;
  for (const auto& np : net.graph().parameters()) ps.push_back(np.param);
  m.sync = std::make_unique<GradSync>(
      mesh, ps, GradSyncOptions{{}, {}, std::size_t{4} << 20});  // layers declare axes
  GradSync* sync = m.sync.get();
  net.graph().on_grads_ready(
      [sync](const std::vector<Parameter*>& ready) { sync->mark_ready(ready); });
  AdamOptions ao;
  ao.lr = 1e-3;
  ao.weight_decay = 1e-4;
  m.opt = std::make_unique<AdamW>(net.graph().parameters(), ao);
  const unsigned seed = static_cast<unsigned>(mesh.rank()) + 1;
  m.x = ShardTensor(mesh, spec, random_local(local_shape, seed));
  // As tessera-train does: the input written into the room its first ops want.
  if (s.ghost_room) {
    const HaloWidths room = net.graph().input_room(0, mesh, {spec});
    if (!room.empty()) {
      const ShardTensor roomy =
          ShardTensor::with_room(mesh, spec, room, DType::f32, MemSpace::Host);
      roomy.local().copy_from(m.x.local());
      m.x = roomy;
    }
  }
  m.y =
      ShardTensor(mesh, net.graph().output_specs({spec})[0], random_local(local_shape, seed + 99));
}

TrainStepRunner::~TrainStepRunner() = default;

const Mesh& TrainStepRunner::mesh() const {
  return impl_->mesh;
}
const std::vector<Index>& TrainStepRunner::shape() const {
  return impl_->shape;
}
GradSync& TrainStepRunner::sync() {
  return *impl_->sync;
}

void TrainStepRunner::step() {
  Impl& m = *impl_;
  m.opt->zero_grad();
  const ShardTensor pred = m.model->forward(m.x);
  const LossResult l = m.loss(pred, m.y);
  m.model->backward(l.grad);
  m.sync->finish();
  clip_grad_norm(m.opt->parameters(), 1.0);
  m.opt->step();
}

json time_train_step(Context& ctx, const StepSetup& s) {
  TrainStepRunner runner(Mesh::line(ctx.world(), "domain"), s);
  const Mesh& mesh = runner.mesh();
  const std::vector<Index>& shape = runner.shape();
  GradSync& sync = runner.sync();
  auto step = [&] { runner.step(); };

  for (int i = 0; i < s.warmup; ++i) step();
  release_cached_host_memory();
  reset_peak_memory(MemSpace::Host);
  struct Rep {
    double total, halo, allreduce, alltoall;
  };
  std::vector<Rep> rs;
  MpiCounters sent;  // of the last timed step (the same every step)
  for (int i = 0; i < s.reps; ++i) {
    MPI_Barrier(mesh.comm());
    comm_times() = {};
    sync.reset_stats();
    mpi_counters() = {};
    const double t0 = MPI_Wtime();
    step();
    sent = mpi_counters();
    double t[4] = {MPI_Wtime() - t0, comm_times().halo_s,
                   comm_times().allreduce_s + sync.stats().seconds, comm_times().alltoall_s};
    struct {
      double v;
      int rank;
    } slowest{t[0], mesh.rank()};
    MPI_Allreduce(MPI_IN_PLACE, &slowest, 1, MPI_DOUBLE_INT, MPI_MAXLOC, mesh.comm());
    MPI_Bcast(t, 4, MPI_DOUBLE, slowest.rank, mesh.comm());
    rs.push_back({t[0], t[1], t[2], t[3]});
  }
  std::sort(rs.begin(), rs.end(), [](const Rep& a, const Rep& b) { return a.total < b.total; });
  const Rep med = rs[rs.size() / 2];
  double peak = static_cast<double>(memory_stats(MemSpace::Host).peak) / (1 << 20);
  MPI_Allreduce(MPI_IN_PLACE, &peak, 1, MPI_DOUBLE, MPI_MAX, mesh.comm());
  // The busiest rank's MPI traffic (the dry run reports the busiest rank too).
  std::int64_t most[7] = {sent.send_bytes,          sent.sends,           sent.iallreduce_bytes,
                          sent.alltoall_bytes,      sent.allgather_bytes, sent.allreduce_f64_bytes,
                          sent.reduce_scatter_bytes};
  PMPI_Allreduce(MPI_IN_PLACE, most, 7, MPI_INT64_T, MPI_MAX, mesh.comm());
  return {{"model", s.model},
          {"ranks", mesh.size()},
          {"shape", shape_str(shape)},
          {"cells", s.grid[0] * s.grid[1]},
          {"t_step_s", med.total},
          {"t_min_s", rs.front().total},
          {"ms_compute", (med.total - med.halo - med.allreduce - med.alltoall) * 1e3},
          {"ms_halo", med.halo * 1e3},
          {"ms_allreduce", med.allreduce * 1e3},
          {"ms_alltoall", med.alltoall * 1e3},  // the FNO's FFT transposes
          {"samples_per_s", static_cast<double>(s.batch) / med.total},
          {"peak_mib", peak},
          // Counted by GradSync in the last timed step (the same every step).
          {"grad_allreduce_bytes", sync.stats().bytes},
          {"mpi_send_bytes", most[0]},
          {"mpi_sends", most[1]},
          {"mpi_iallreduce_bytes", most[2]},
          {"mpi_alltoall_bytes", most[3]},
          {"mpi_allgather_bytes", most[4]},
          {"mpi_allreduce_f64_bytes", most[5]},
          {"mpi_reduce_scatter_bytes", most[6]}};
}

json paired_efficiency(Context& ctx, const StepSetup& s, int pairs) {
  TESSERA_CHECK(pairs > 0, "paired_efficiency: " << pairs << " pairs");
  TrainStepRunner par(Mesh::line(ctx.world(), "domain"), s);
  const Mesh& mesh = par.mesh();
  std::unique_ptr<TrainStepRunner> one;
  if (mesh.rank() == 0) one = std::make_unique<TrainStepRunner>(Mesh::line(MPI_COMM_SELF), s);
  const PairedEfficiency p = time_paired(
      mesh.comm(), pairs, [&] { one->step(); }, [&] { par.step(); });
  return {{"ranks", mesh.size()},
          {"shape", shape_str(par.shape())},
          {"pairs", pairs},
          {"cores", p.cores},
          {"t1_s", summarize(p.t1_s).median_s},
          {"tN_s", summarize(p.tn_s).median_s},
          {"e_median", p.e_median()},
          {"e_min", summarize(p.e).min_s},
          {"e_max", *std::max_element(p.e.begin(), p.e.end())},
          {"t1_pairs_s", p.t1_s},
          {"tN_pairs_s", p.tn_s}};
}

}  // namespace tessera::bench
