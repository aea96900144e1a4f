#pragma once
// The configuration of tessera-train: TOML sections mesh, data, model, optim, schedule
// and train. Every key has a type, a default, a documented range and can be overridden
// on the command line as --section.key=value. Errors name the key and where it came
// from (file or flag) and say what was expected.
#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/tensor/mesh.hpp"

namespace tessera::app {

struct MeshConfig {
  std::string shape = "auto";  // "domain=4,data=2", "domain=auto,data=2", "auto"
};

struct DataConfig {
  std::string path;                          // HDF5 dataset (tessera-prep schema)
  std::vector<std::string> inputs = {"a"};   // input fields (channels in this order)
  std::vector<std::string> targets = {"u"};  // target fields
  bool normalize = true;                     // per-field mean/std from the training split
  bool shuffle = true;                       // shuffle training samples each epoch
  bool stream = false;  // read each batch from the file instead of holding every sample
};

struct ModelConfig {
  std::string type = "unet";  // unet | fno | transolver | pointconv | vit
  std::int64_t width = 16;    // unet: channels of level 0 (doubled per level); fno: of blocks
  std::vector<std::int64_t> modes = {12};  // fno: retained modes, for all dims or per dim
  std::int64_t layers = 4;                 // fno: Fourier blocks; transolver: blocks
  std::int64_t projection = 128;           // fno: hidden channels of the projection
  std::string weights = "replicated";      // fno: spectral weights replicated | mode_sharded
  std::int64_t heads = 4;                  // transolver: attention heads (dividing width)
  std::int64_t slices = 32;                // transolver: physics-attention slices
  std::int64_t neighbours = 16;            // pointconv: neighbours per point
  std::int64_t patch = 4;                  // vit: patch edge in cells
  std::int64_t dim = 32;                   // vit: token channels
  std::string attention = "auto";  // vit: auto | ring | all_to_all | all_gather | neighbourhood
  std::string positions = "sinusoidal";  // vit: sinusoidal | learned
  std::int64_t window = 7;               // vit, neighbourhood attention: tokens per dim
  double radius = 0.0;                   // pointconv: > 0: ball query within it, else kNN
  std::int64_t depth = 3;                // unet: levels (down/up steps); vit: transformer blocks
  std::int64_t kernel_size = 3;          // conv kernel per spatial dim
  std::string norm = "group";            // group | batch | none
  std::int64_t groups = 4;               // GroupNorm groups
  std::string activation = "gelu";
  std::string down = "pool";      // pool | conv (strided)
  std::string up = "upsample";    // upsample | transposed_conv
  std::string padding = "zeros";  // unet convs: zeros | circular | reflect | replicate
  std::string dtype = "float32";  // float32 | float64
};

struct OptimConfig {
  std::string name = "adamw";  // sgd | adam | adamw
  double lr = 1e-3;
  double weight_decay = 0.0;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;  // adam, adamw
  double momentum = 0.9, dampening = 0.0;         // sgd
  bool nesterov = false;                          // sgd
  double grad_clip = 0.0;                         // max global gradient norm, 0: off
};

struct ScheduleConfig {
  std::string type = "constant";  // constant | warmup | cosine | step
  std::int64_t warmup_steps = 0;
  double min_lr = 0.0;            // cosine
  std::int64_t step_size = 1000;  // step
  double gamma = 0.1;             // step
};

struct TrainLoopConfig {
  std::int64_t steps = 0;  // exactly one of steps and epochs is > 0
  std::int64_t epochs = 0;
  std::int64_t batch_size = 1;           // global batch (over all data-parallel replicas)
  std::int64_t accumulate = 1;           // micro-batches per step (gradient accumulation)
  std::string loss = "rel_l2";           // mse | rel_l2
  std::int64_t checkpoint_interval = 0;  // steps between checkpoints, 0: at the end only
  std::string checkpoint_dir = "checkpoints";
  double validation_split = 0.1;  // fraction of samples held out
  bool resume = false;            // continue from the latest checkpoint in checkpoint_dir
  std::string metrics_csv;        // per-step metrics, empty: none
  std::int64_t seed = 0;
  std::int64_t log_interval = 1;      // steps between progress lines
  bool device_stats = false;          // print host<->device copies, bytes and launches per step
  std::int64_t keep_checkpoints = 3;  // newest checkpoints kept in checkpoint_dir, 0: all
  std::string nonfinite = "stop";     // stop | skip_step: a non-finite loss or gradient
  std::int64_t max_skips = 3;         // skip_step: stop after this many skipped steps in a row
  bool deterministic = true;          // fixed order of halo-adjoint additions (repeatable)
  bool ghost_room = true;             // values written into their convs' ghost room (no copies)
  bool recompute = false;             // model blocks recomputed in backward (Graph::recompute)
  std::string stop_signal = "USR1";   // USR1 | USR2 | none: checkpoint at the step's end, stop
};

struct TrainConfig {
  MeshConfig mesh;
  DataConfig data;
  ModelConfig model;
  OptimConfig optim;
  ScheduleConfig schedule;
  TrainLoopConfig train;
};

// The command line, read by the apps' one parser (apps/common/cli.hpp):
// [CONFIG] [--section.key=value ...] [--resume] [--print-config] [--help].
struct CliArgs {
  std::string config_path;             // empty: defaults and overrides only
  std::vector<std::string> overrides;  // "section.key=value"; --resume adds train.resume=true
  bool help = false, print_config = false;
  // --dry-run[=json]: the step's volumes for --grid over --ranks, without data (dry_run.hpp).
  std::string dry_run;          // "", "table" or "json"
  std::vector<Index> dry_grid;  // global spatial extents
  int dry_ranks = 0;            // 0: the ranks launched
  Index dry_batch = 0;          // 0: train.batch_size
};
CliArgs parse_cli(int argc, char** argv);  // throws on unknown options
CliArgs parse_cli(const std::vector<std::string>& args);

// Defaults, then the file (if any), then the overrides in order; every value is
// type- and range-checked. Throws tessera::Error("config: ...").
TrainConfig load_config(const std::string& path, const std::vector<std::string>& overrides);
TrainConfig parse_config(const std::string& toml_text, const std::vector<std::string>& overrides,
                         const std::string& source = "config");
// The same, collective: every rank of comm throws the same error when any rank fails
// (a file missing on one node fails the job, it does not hang it).
TrainConfig load_config(MPI_Comm comm, const CliArgs& args);

// What a training run needs beyond well-typed values: data.path set, exactly one of
// train.steps / train.epochs. Throws naming the key.
void check_complete(const TrainConfig& c);

// The model keys set away from their defaults that model.type (and, for model.window,
// model.attention) does not use, one line each ("model.window = 9: only neighbourhood
// attention uses it ..."): tessera-train prints them as warnings. Keys at their default
// are not named, so a printed config read back warns of nothing.
std::vector<std::string> unused_model_keys(const TrainConfig& c);

// The fully resolved config as TOML (parses back to the same config).
std::string to_toml(const TrainConfig& c);
// The settings that differ between two configs, "section.key: A -> B" each, in to_toml's
// order, leaving out train.resume (a resumed run's resume is true).
std::vector<std::string> changed_settings(const TrainConfig& from, const TrainConfig& to);
// --help text: usage, the options, and every key with its type, default and range.
std::string usage(const std::string& program);

// The mesh of mesh.shape over comm; collective. A shape that does not fit the rank
// count, or more than one "data" axis, throws on every rank naming mesh.shape.
Mesh make_mesh(MPI_Comm comm, const TrainConfig& c);
// The same for a mesh spec given by `option` (tessera-infer's --mesh). An axis named like
// "data" but not it (dta, Data) is refused: it would split the grid instead of the batch.
Mesh make_mesh(MPI_Comm comm, const std::string& spec, const std::string& option);

}  // namespace tessera::app
