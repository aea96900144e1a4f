#pragma once
// Trainer: a UNet trained on grid data over a mesh, as tessera-train runs it. The loss is
// a mean over the global batch, so parameter gradients are summed over every axis that
// splits the batch (domain and data) in one bucketed all-reduce that starts while
// backward is still running (GradSync). Every rank holds the same parameters and takes
// the same optimizer step.
//
// Deterministic: the same config gives the same loss curve on any mesh (up to rounding
// of sums in another order), and a run restored from a checkpoint continues exactly as
// the uninterrupted one (parameters, optimizer state, sampler state and step).
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "apps/common/config.hpp"
#include "apps/common/data.hpp"
#include "apps/common/memory_estimate.hpp"
#include "io/checkpoint.hpp"
#include "kernels/device/device.hpp"
#include "runtime/comm/grad_sync.hpp"
#include "runtime/train/loss.hpp"
#include "runtime/train/optim.hpp"
#include "runtime/nn/state_dict.hpp"
#include "runtime/train/fno.hpp"
#include "runtime/train/point_conv_net.hpp"
#include "runtime/train/transolver.hpp"
#include "runtime/train/vit.hpp"
#include "runtime/train/unet.hpp"

namespace tessera::app {

// Seconds, of the rank whose step took longest.
struct StepTimes {
  double total = 0, halo = 0, allreduce = 0;
  double alltoall = 0;  // all-to-all and ring transfers waited for (FFT transposes, attention)
  double compute() const { return total - halo - allreduce - alltoall; }
};

struct StepResult {
  std::int64_t step = 0;  // steps done after this one
  double loss = 0, lr = 0, grad_norm = 0;
  Index samples = 0;  // global batch
  StepTimes t;
  device::Stats dev;  // this rank's copies, bytes and launches in the step (batch included)
  // train.nonfinite = "skip_step": why this step's update was skipped ("" when it was not);
  // the step count did not advance.
  std::string skipped;
};

struct EvalResult {
  double loss = 0;    // the training loss on the validation samples (normalized units)
  double rel_l2 = 0;  // mean per-sample relative L2 error in physical units (samples whose
                      // target is zero have none and are left out; NaN if all are)
  Index samples = 0;
  Index loss_samples = 0;  // those the loss covers (rel_l2 leaves zero targets out)
};

// The UNet or FNO a config describes for data of these channels and spatial dims.
// The models' initialisation seed (32 bits) of train.seed: seeds below 2^32 as they are,
// larger ones with their high half mixed in (a plain cast made seeds 2^32 apart alike).
unsigned init_seed(std::int64_t seed);

UNetOptions unet_options(const TrainConfig& c, int spatial_dims, Index in_channels,
                         Index out_channels, MemSpace space);
FnoOptions fno_options(const TrainConfig& c, int spatial_dims, Index in_channels,
                       Index out_channels, MemSpace space);
TransolverOptions transolver_options(const TrainConfig& c, int spatial_dims, bool points,
                                     Index in_channels, Index out_channels, MemSpace space);
// `grid`: the spatial grid the model trains on (learned positions keep a table per patch).
VitOptions vit_options(const TrainConfig& c, int spatial_dims, Index in_channels,
                       Index out_channels, MemSpace space, const std::vector<Index>& grid = {});
PointConvNetOptions point_conv_options(const TrainConfig& c, bool points, Index in_channels,
                                       Index out_channels, MemSpace space);
// Why the configured model cannot take a grid of `shape` (N, C, spatial...), said before
// make_model, whose parameter-memory check would otherwise speak first (a ViT patch past the
// grid); "" when it can, or for models whose weights do not grow with the grid.
std::string grid_problem_before_build(const TrainConfig& c, const std::vector<Index>& shape);

// The model of model.type for data of `spatial_dims` (a point cloud: one dim of points) on
// the training grid `grid` (needed by learned positions; inference passes the checkpoint's);
// its signature() is stored in checkpoints (a mismatch on resume is an error). Collective
// over comm (the ranks that build it): a host model's allocations while it is built (values
// and gradients) may not pass 2 / `copies` of this rank's share of its node's available
// memory (copies: of the parameters the run will hold, 2 + the optimizer's states for
// training, 2 for inference), refused on every rank alike, so parameters too
// large for the node are refused as they are built, naming them, not by the kernel's OOM
// killer once their initialization touches pages that allocation (overcommitted) only
// promised.
std::unique_ptr<Model> make_model(MPI_Comm comm, int copies, const TrainConfig& c, int spatial_dims,
                                  Index in_channels, Index out_channels, MemSpace space,
                                  bool points = false, const std::vector<Index>& grid = {});

// Data-sampling state: the epoch's permutation of the training samples and the position
// in it, with the generator that draws the next permutation. Batches are cut from the
// stream of permutations (one may hold the end of one epoch and the start of the next,
// never a sample twice).
class Sampler {
 public:
  Sampler(Index train_samples, Index batch, bool shuffle, std::uint64_t seed);
  std::vector<Index> next();  // indices into the training split
  std::int64_t epoch() const { return epoch_; }
  // Samples drawn so far (over all passes, whatever the batch size was).
  std::int64_t drawn() const { return epoch_ * static_cast<std::int64_t>(perm_.size()) + cursor_; }
  std::string state() const;
  void load_state(const std::string& s);

 private:
  void new_epoch();
  void keep_out_of_head(const std::vector<Index>& taken);
  Index batch_;
  bool shuffle_;
  std::mt19937_64 rng_;
  std::vector<Index> perm_;
  Index cursor_ = 0;
  std::int64_t epoch_ = 0;
};

class Trainer {
 public:
  // Collective over mesh: loads the data, checks that the model can take it, builds
  // the model, optimizer and schedule. Errors are collective.
  Trainer(const Mesh& mesh, const TrainConfig& cfg, std::string config_text = "");

  StepResult step();
  EvalResult validate();

  std::int64_t steps_done() const { return optimizer_->steps_taken(); }
  std::int64_t total_steps() const { return total_steps_; }
  // Passes over the training split drawn so far (the metrics' epoch column).
  double epochs_drawn() const {
    return static_cast<double>(sampler_->drawn()) / static_cast<double>(train_.size());
  }
  std::size_t validation_samples() const { return val_.size(); }
  // The per-rank memory estimate the node was checked against before the data was read.
  const MemoryEstimate& memory_estimate() const { return memory_; }
  Index train_samples() const { return static_cast<Index>(train_.size()); }
  Index val_samples() const { return static_cast<Index>(val_.size()); }
  const GridData& data() const { return *data_; }
  Model& model() { return *model_; }
  const Mesh& mesh() const { return mesh_; }
  const Normalizer& input_norm() const { return data_->input_norm(); }
  const Normalizer& target_norm() const { return data_->target_norm(); }

  io::Checkpoint checkpoint() const;
  void save(const std::string& path) const;
  // Restores parameters, optimizer, sampler and step; the model must match. The data then
  // takes the checkpoint's normalization, and the training targets are checked under it.
  void restore(const io::Checkpoint& c);
  // With train.loss = "rel_l2": throws (collective) naming the first training sample whose
  // target, normalized as now, is zero everywhere (it has no relative error). The constructor
  // runs it unless train.resume is set (a resume's normalization is the checkpoint's, known at
  // restore(), which runs it); a resume that finds no checkpoint runs it itself.
  void check_training_targets() const;

 private:
  // The checkpoint with parameters and optimizer state as entries made when written (one
  // whole tensor at a time); checkpoint() makes them all.
  io::Checkpoint checkpoint_entries() const;
  // The ghost room the model's graph wants its input in, for a batch of this size (the
  // batch is written straight into it).
  HaloWidths input_room(std::size_t batch);
  // train.epochs counts passes drawn: the total becomes the steps taken plus those that draw
  // the rest at this run's batch size, and the schedule spans it (after a restore, and after
  // a skipped update, whose batch was drawn all the same).
  void count_passes_left();

  Mesh mesh_;
  TrainConfig cfg_;
  std::string config_text_;
  MemSpace space_ = MemSpace::Host;
  std::unique_ptr<GridData> data_;
  MemoryEstimate memory_;
  std::vector<Index> train_, val_;
  std::vector<Index> target_channels_;  // per target field
  std::unique_ptr<Model> model_;
  std::unique_ptr<Optimizer> optimizer_;
  LrSchedule schedule_;
  std::unique_ptr<GradSync> sync_;
  // Samples of one forward and backward (the constructor checks the division).
  Index micro_batch() const { return cfg_.train.batch_size / cfg_.train.accumulate; }
  // Gradients go to GradSync as backward makes them only in a step's last micro-batch.
  bool sync_as_ready_ = true;
  std::unique_ptr<Loss> loss_;
  // Validation's: zero targets (no relative error) left out of the means, not an error.
  std::unique_ptr<Loss> val_loss_, val_rel_l2_;
  std::unique_ptr<Sampler> sampler_;
  std::int64_t total_steps_ = 0;
  std::int64_t skips_in_a_row_ = 0;
};

// Normalizers as checkpoint buffers ("data.input_mean", ...) and back; `normalized` is the
// checkpoint's own data.normalize, and buffers missing where it is set (or there where it
// is not) are refused: the weights expect what it says.
std::vector<NamedTensor> normalizer_buffers(const Normalizer& in, const Normalizer& out);
std::pair<Normalizer, Normalizer> normalizers_from(const std::vector<NamedTensor>& buffers,
                                                   bool normalized);

}  // namespace tessera::app
