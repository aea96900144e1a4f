#pragma once
// One training step of a model on random data, as tessera-train takes it (forward,
// relative-L2 loss, backward with the bucketed gradient all-reduce, clipping, AdamW), on
// (batch, 1, H, W) grids split over the ranks along H; shared by the train and scaling
// benchmark cases. Models: the demo's UNet (width, depth; GroupNorm with 4 groups, GELU,
// pooling and upsampling) and an FNO (width, Fourier blocks, modes; projection 2x width).
#include <memory>
#include <string>
#include <vector>

#include "apps/bench/report.hpp"
#include "decomp/index.hpp"
#include "runtime/tensor/context.hpp"
#include "runtime/tensor/mesh.hpp"

namespace tessera {
class GradSync;
}  // namespace tessera

namespace tessera::bench {

struct StepSetup {
  std::string model = "unet";  // unet | fno | transolver
  Index width = 8, batch = 2;
  int depth = 3;                             // unet: levels down; fno, transolver: blocks
  Index modes = 8;                           // fno: retained modes per dim
  std::string fno_weights = "replicated";    // fno: replicated | mode_sharded
  std::string vit_positions = "sinusoidal";  // vit: sinusoidal | learned
  Index slices = 16;                         // transolver: slices per head (4 heads)
  std::string attention = "auto";            // vit: the global attention's algorithm
  std::vector<Index> grid;                   // global H, W
  int reps = 5, warmup = 2;
  bool ghost_room = true;  // Graph::ghost_room (tessera-train's train.ghost_room)
  bool recompute = false;  // Graph::recompute (tessera-train's train.recompute)
  bool deterministic =
      true;  // the halo adjoint's fixed order (tessera-train's train.deterministic)
};

// The model, its data, gradient reducer and optimizer on one mesh; step() takes one step.
class TrainStepRunner {
 public:
  TrainStepRunner(const Mesh& mesh, const StepSetup& s);  // collective over the mesh
  ~TrainStepRunner();
  void step();
  const Mesh& mesh() const;
  const std::vector<Index>& shape() const;  // the global input shape
  GradSync& sync();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Times `reps` steps after `warmup` untimed ones. Row: model, ranks, shape, cells, t_step_s
// (median of the slowest rank per step), t_min_s, the slowest rank's split into
// ms_compute / ms_halo / ms_allreduce / ms_alltoall (the FFT's transposes), samples_per_s,
// peak_mib (tracked bytes, largest rank, timed steps), grad_allreduce_bytes (per rank and
// step, as GradSync counts them), and what the busiest rank handed to MPI in a step
// (mpi_counters.hpp): mpi_send_bytes, mpi_sends (the halo messages), mpi_iallreduce_bytes.
json time_train_step(Context& ctx, const StepSetup& s);

// The plain efficiency E = T(1 rank) / (min(N, cores) T(N ranks)) measured in pairs within
// one launch of N > 1 ranks, so that both sides of each ratio see the same machine: rank 0
// also holds the one-rank model (on MPI_COMM_SELF), and each of `pairs` pairs times one
// one-rank step (the other ranks wait asleep, leaving their cores idle) and one N-rank step
// (the slowest rank), in alternating order, each after an untimed step of its own side. Row: pairs,
// t1_s and tN_s (medians), e_median, e_min, e_max (of the per-pair ratios), cores, and every pair's
// times (t1_pairs_s, tN_pairs_s). Collective over ctx.world().
json paired_efficiency(Context& ctx, const StepSetup& s, int pairs);

}  // namespace tessera::bench
