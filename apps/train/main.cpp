// tessera-train CONFIG [--section.key=value ...] [--resume] [--print-config] [--help]
// Trains a UNet or an FNO on sharded HDF5 grid data (see apps/common/trainer.hpp): a progress line
// on rank 0, metrics to CSV, checkpoints at an interval and at the end, --resume from the
// latest checkpoint in train.checkpoint_dir (at any rank count and mesh shape).
#include <algorithm>
#include <csignal>
#include <cmath>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <vector>

#include "apps/common/builders.hpp"
#include "apps/common/dry_run.hpp"
#include "apps/common/metrics_log.hpp"
#include "apps/common/node_memory.hpp"
#include "apps/common/report_errors.hpp"
#include "apps/common/run_files.hpp"
#include "apps/common/stop_signal.hpp"
#include "apps/common/trainer.hpp"
#include "io/output_file.hpp"
#include "runtime/tensor/context.hpp"
#include "runtime/comm/collective_error.hpp"
#include "runtime/comm/fault_inject.hpp"
#include "runtime/comm/mpi_error.hpp"
#include "kernels/device/memory.hpp"

using namespace tessera;
using namespace tessera::app;

namespace {

std::string fmt(double v, int prec = 4) {
  std::ostringstream os;
  os << std::setprecision(prec) << v;
  return os.str();
}

// "val 0.12 rel_l2 0.34", or what stands for it when train.validation_split holds none back
// (0, or a fraction of a few samples that rounds to none).
std::string val_text(const EvalResult& ev, const Trainer& tr, const TrainConfig& cfg) {
  if (tr.validation_samples() > 0) return "val " + fmt(ev.loss) + " rel_l2 " + fmt(ev.rel_l2);
  if (cfg.train.validation_split == 0) return "no validation (train.validation_split = 0)";
  return "no validation (train.validation_split = " + fmt(cfg.train.validation_split) + " of " +
         std::to_string(tr.data().samples()) + " samples rounds to none)";
}

// --dry-run: the volumes of one step of the configured model, on rank 0, without data.
int dry_run_main(Context& ctx, const TrainConfig& cfg, const CliArgs& cli) {
  const int ranks = cli.dry_ranks > 0 ? cli.dry_ranks : ctx.size();
  const Index batch = cli.dry_batch > 0 ? cli.dry_batch : cfg.train.batch_size;
  const Index acc = cfg.train.accumulate;  // a forward and backward hold batch / acc samples
  const auto nd = static_cast<int>(cli.dry_grid.size());
  StepVolumes v;
  collective_run(ctx.world(), [&] {
    const auto& in = cfg.data.inputs;
    TESSERA_CHECK(std::find(in.begin(), in.end(), "coords") == in.end(),
                  "--dry-run: the dry run covers grid inputs; point clouds ("
                  "\"coords\" among data.inputs) have neighbourhoods that depend on the data");
    const auto cin = static_cast<Index>(in.size());
    const auto cout = static_cast<Index>(cfg.data.targets.size());
    std::vector<Index> grid_shape = {batch, cin};
    grid_shape.insert(grid_shape.end(), cli.dry_grid.begin(), cli.dry_grid.end());
    const std::string p = grid_problem_before_build(cfg, grid_shape);
    TESSERA_CHECK(p.empty(), "dry run: " << p);
    const std::unique_ptr<Model> model =
        make_model(ctx.world(), 2, cfg, nd, cin, cout, MemSpace::Host, false, cli.dry_grid);
    model->graph().recompute(cfg.train.recompute);
    TESSERA_CHECK(batch % acc == 0, "--dry-run: a batch of "
                                        << batch
                                        << " is not divisible by train.accumulate = " << acc);
    std::vector<Index> shape = {batch / acc, cin};
    shape.insert(shape.end(), cli.dry_grid.begin(), cli.dry_grid.end());
    v = dry_run(*model, cfg.model.type, shape, ranks, model_dtype(cfg.model),
                cfg.train.loss == "rel_l2", optimizer_states(cfg.optim));
    v.micro_batches = static_cast<int>(acc);
  });
  // The dry run splits as mesh.shape = "auto" does: a config's own mesh is not what it shows
  // (said on stderr, so that the JSON on stdout stays whole).
  if (ctx.rank() == 0 && cfg.mesh.shape != "auto")
    std::cerr << "warning: mesh.shape = \"" << cfg.mesh.shape
              << "\" is not used by --dry-run, which splits the first spatial dim over --ranks "
                 "domain ranks (as mesh.shape = \"auto\")"
              << std::endl;
  if (ctx.rank() == 0) std::cout << (cli.dry_run == "json" ? dry_run_json(v) : dry_run_table(v));
  return 0;
}

int run(Context& ctx, int argc, char** argv) {
  const ReleaseHeldStopSignals release;  // on every path that ends before they are caught
  const CliArgs cli = parse_cli(argc, argv);
  if (cli.help) {
    if (ctx.rank() == 0) std::cout << usage("tessera-train");
    return 0;
  }
  // Tests: a warning signal to one rank before its config is read (held since main began).
  if (fault_point("start.usr1")) std::raise(SIGUSR1);
  if (fault_point("start.usr2")) std::raise(SIGUSR2);
  const TrainConfig cfg = load_config(ctx.world(), cli);
  const std::string resolved = to_toml(cfg);
  if (cli.print_config || !cli.dry_run.empty()) release_stop_signals();  // nothing to stop
  if (cli.print_config) {
    if (ctx.rank() == 0) std::cout << resolved;
    return 0;
  }
  if (!cli.dry_run.empty()) return dry_run_main(ctx, cfg, cli);
  check_complete(cfg);
  // Before the data load (minutes for a large file): the warning signal, held since main
  // began, is kept; the other held one gets its default action back.
  const int stop_sig = stop_signal_number(cfg.train.stop_signal);
  catch_stop_signal(stop_sig);
  const Mesh mesh = make_mesh(ctx.world(), cfg);
  const bool root = ctx.rank() == 0;
  if (root)
    for (const std::string& w : unused_model_keys(cfg)) std::cout << "warning: " << w << std::endl;
  const double t_setup = MPI_Wtime();
  Trainer tr(mesh, cfg, resolved);
  if (root)
    std::cout << "tessera-train: " << ctx.size() << " ranks (" << ctx.threads()
              << (ctx.threads() == 1 ? " thread" : " threads") << " each), mesh " << mesh.str()
              << ", data " << cfg.data.path << " (" << tr.data().samples() << " samples, grid "
              << shape_str(tr.data().spatial()) << ": " << tr.train_samples() << " train, "
              << tr.val_samples() << " validation), model " << tr.model().signature() << " ("
              << tr.model().graph().parameters().size() << " parameter tensors), "
              << cfg.model.dtype << ", " << cfg.optim.name << ", batch " << cfg.train.batch_size
              << (cfg.train.accumulate > 1
                      ? " (" + std::to_string(cfg.train.accumulate) + " micro-batches of " +
                            std::to_string(cfg.train.batch_size / cfg.train.accumulate) + ")"
                      : std::string())
              << ", " << tr.total_steps() << " steps" << std::endl;
  // Batch norm normalizes over the samples a forward holds: a micro-batch's.
  if (root && cfg.train.accumulate > 1 && cfg.model.type == "unet" && cfg.model.norm == "batch")
    std::cout << "warning: model.norm = \"batch\" with train.accumulate = " << cfg.train.accumulate
              << ": each forward normalizes by its micro-batch's statistics ("
              << cfg.train.batch_size / cfg.train.accumulate
              << " samples), not the whole batch's, and the running statistics move once per "
                 "micro-batch (as in PyTorch); model.norm = \"group\" does not depend on the batch"
              << std::endl;
  // More neighbours than a cloud has points: each point takes the whole cloud.
  if (root && cfg.model.type == "pointconv" && tr.data().points() && !tr.data().spatial().empty() &&
      cfg.model.neighbours > tr.data().spatial().front())
    std::cout << "warning: model.neighbours = " << cfg.model.neighbours << " is more than the "
              << tr.data().spatial().front() << " points of a cloud: each point takes all of them"
              << std::endl;
  // More slices than tokens: the cost grows with the slices (tokens x slices, and slices^2
  // for the attention among the slice tokens, per head and layer), the capacity does not.
  if (root && cfg.model.type == "transolver") {
    Index tokens = 1;
    for (const Index e : tr.data().spatial()) tokens *= e;
    if (cfg.model.slices > tokens)
      std::cout << "warning: model.slices = " << cfg.model.slices << " is more than the " << tokens
                << (tr.data().points() ? " points of a cloud" : " cells of a sample")
                << ": the cost grows with the slices (tokens x slices, and slices^2 among the "
                   "slice tokens, per head and layer), what the model can tell apart does not"
                << std::endl;
  }
  // A target that is also an input: the model learns to copy it.
  for (const std::string& t : cfg.data.targets)
    if (root &&
        std::find(cfg.data.inputs.begin(), cfg.data.inputs.end(), t) != cfg.data.inputs.end())
      std::cout << "warning: data.targets names '" << t
                << "', which data.inputs names too: the model is trained to copy it" << std::endl;

  // Before step 1: the folders outputs go to must take files (not at the first checkpoint).
  check_writable(ctx.world(), cfg);
  const CheckpointDirLock folder_lock(ctx.world(), cfg.train.checkpoint_dir);
  if (!cfg.train.metrics_csv.empty())  // the metrics file is rewritten: never an input
    io::refuse_alias(ctx.world(), "train.metrics_csv", cfg.train.metrics_csv,
                     {{"data.path", cfg.data.path}, {"the config file", cli.config_path}});

  bool resumed = false;
  if (!cfg.train.resume) {
    // A new run writes ckpt_STEP.h5 and prunes the oldest: among another run's checkpoints it
    // would overwrite theirs and could prune its own newest. Refused, before any step.
    const std::vector<std::string> there =
        io::list_checkpoints(cfg.train.checkpoint_dir, ctx.world());
    TESSERA_CHECK(there.empty(), "train.checkpoint_dir '"
                                     << cfg.train.checkpoint_dir << "' already holds "
                                     << there.size() << " checkpoint(s) (newest " << there.front()
                                     << "): pass --resume to continue that run, or choose "
                                        "another train.checkpoint_dir, or remove them");
  }
  if (cfg.train.resume) {
    // The newest checkpoint that loads and restores; a damaged or non-finite one is passed
    // over, saying so. One of another model or optimizer is refused (restore throws).
    const std::vector<std::string> all =
        io::list_checkpoints(cfg.train.checkpoint_dir, ctx.world());
    std::string last_why;
    for (const std::string& path : all) {
      io::Checkpoint c;
      try {
        try {
          // Streamed: parameters and optimizer state checked, then restored, one whole
          // tensor at a time.
          c = io::load_checkpoint(path, ctx.world(), io::CheckpointParts::All,
                                  io::CheckpointRead::Streamed);
        } catch (const Error& e) {  // unreadable, truncated, non-finite
          throw io::DamagedCheckpoint(e.what());
        }
        tr.restore(c);
      } catch (const io::DamagedCheckpoint& e) {
        if (root) std::cout << "resume: passing over " << path << ": " << e.what() << std::endl;
        if (last_why.empty()) last_why = path + ": " + e.what();
        continue;
      }
      resumed = true;
      if (root) std::cout << "resume: " << path << " (step " << tr.steps_done() << ")" << std::endl;
      // Accepted changes (a learning rate, the shuffle, the step count) continue the run
      // otherwise than it would have gone: said, so a curve that bends is explained.
      if (root) {
        std::vector<std::string> changed;
        try {
          changed = changed_settings(parse_config(c.config, {}, "checkpoint"), cfg);
        } catch (const Error&) {  // restore parsed it: not reached
        }
        for (const std::string& ch : changed)
          std::cout << "resume: changed since the checkpoint: " << ch << std::endl;
      }
      if (root && tr.steps_done() > tr.total_steps())
        std::cout << "resume: the checkpoint is past the run's " << tr.total_steps()
                  << " steps (train.steps or train.epochs): nothing to train; raise them to go "
                     "on"
                  << std::endl;
      break;
    }
    // Checkpoints there, none usable: starting over would overwrite and prune them.
    TESSERA_CHECK(resumed || all.empty(), "resume: none of the "
                                              << all.size() << " checkpoint(s) in "
                                              << cfg.train.checkpoint_dir
                                              << " can be used (the newest, " << last_why
                                              << "); not starting over among them: resume with "
                                                 "the settings they were written with, or remove "
                                                 "them, or choose another train.checkpoint_dir");
    if (!resumed && root)
      std::cout << "resume: no checkpoint in " << cfg.train.checkpoint_dir << ", starting at step 0"
                << std::endl;
    if (!resumed) tr.check_training_targets();  // under the data's own normalization
  }

  // Rows after the resumed step were written by the run that failed: they go.
  MetricsLog metrics(ctx.world(), cfg.train.metrics_csv, cfg.train.resume,
                     resumed ? tr.steps_done() : -1);
  const bool validating = tr.validation_samples() > 0;
  // A value, or nothing where there is no validation set (not "nan").
  const auto val_cells = [&](const EvalResult& ev) {
    std::ostringstream o;
    o << std::setprecision(17);
    if (validating)
      o << ev.loss << ',' << ev.rel_l2;
    else
      o << ',';
    return o.str();
  };
  if (root)
    std::cout << "setup " << fmt(MPI_Wtime() - t_setup, 3) << " s; peak memory per rank "
              << fmt(peak_mib_max(ctx.world()), 4) << " MiB; estimate for training "
              << describe(tr.memory_estimate()) << std::endl;
  else
    peak_mib_max(ctx.world());

  // A non-finite validation loss (the weights finite, but the model's output on held-out
  // samples is not): "stop" ends the run here, after its metrics row; "skip_step" says so.
  const auto check_validation = [&](const EvalResult& ev, std::int64_t step) {
    // No loss where it covers no sample (rel_l2 over held-out targets that are all zero).
    if (!validating || ev.loss_samples == 0 || std::isfinite(ev.loss)) return;
    std::ostringstream what;
    what << "step " << step << ": non-finite validation loss (" << ev.loss
         << "): the model's output on the held-out samples is not finite";
    if (cfg.train.nonfinite == "stop")
      throw Error(what.str() +
                  "; training stopped (train.nonfinite = \"stop\"; this step's checkpoint was "
                  "not written)");
    if (root)
      std::cout << what.str() << " (train.nonfinite = \"skip_step\": going on)" << std::endl;
  };

  // A row of a validation alone (no step's loss or figures): step 0's, and that of an update
  // validated after the loop.
  const auto validation_row = [&](std::int64_t step, double epoch, double lr,
                                  const EvalResult& ev) {
    std::ostringstream row;
    row << std::setprecision(17) << step << ',' << epoch << ',' << lr << ",," << val_cells(ev)
        << ",,,,,,,,\n";
    metrics.append(row.str());
  };
  if (tr.steps_done() == 0 && tr.total_steps() > 0) {  // where training starts from
    const EvalResult ev = tr.validate();
    if (root)
      std::cout << "step 0/" << tr.total_steps() << " | " << val_text(ev, tr, cfg) << std::endl;
    validation_row(0, 0, cfg.optim.lr, ev);
    check_validation(ev, 0);
  }
  const std::int64_t log_every = std::max<std::int64_t>(1, cfg.train.log_interval);
  const double t_train = MPI_Wtime();
  std::int64_t steps_run = 0;
  EvalResult last_eval;
  std::int64_t saved_step = -1, validated_step = -1;
  double last_lr = cfg.optim.lr;  // the last update's, for a row written after the loop
  const auto save_checkpoint = [&](std::int64_t step) {
    const std::string path = io::checkpoint_path(cfg.train.checkpoint_dir, step);
    tr.save(path);
    saved_step = step;
    if (root) std::cout << "checkpoint " << path << std::endl;
    const int keep = static_cast<int>(std::min<std::int64_t>(cfg.train.keep_checkpoints, 1 << 30));
    for (const std::string& gone :
         io::prune_checkpoints(cfg.train.checkpoint_dir, keep, ctx.world(), path))
      if (root)
        std::cout << "checkpoint " << gone << " removed (train.keep_checkpoints = " << keep << ")"
                  << std::endl;
  };
  // The signal's stop: every rank learns it at the same step (one all-reduce of a flag a step).
  bool stopped = false;
  // The total can shrink as it runs: under train.epochs a skipped update's batch is drawn.
  while (!stopped && tr.steps_done() < tr.total_steps()) {
    const StepResult r = tr.step();
    stopped = stop_sig != 0 && stop_asked(ctx.world());
    if (!r.skipped.empty()) {  // train.nonfinite = "skip_step": no row, no checkpoint
      if (root) std::cout << r.skipped << std::endl;
      continue;  // stopped: the update before it is saved below, as after a skipped last batch
    }
    const std::int64_t total = tr.total_steps();
    ++steps_run;
    last_lr = r.lr;
    const bool last = r.step == total;
    // A stop ends the run here as a last step does: logged, validated, checkpointed.
    const bool log = r.step % log_every == 0 || last || stopped;
    const std::int64_t every = cfg.train.checkpoint_interval;
    const bool checkpoint = (every > 0 && r.step % every == 0) || last || stopped;
    // Validated where logged, and before every checkpoint (none is written of a model
    // whose held-out loss is not finite).
    const bool validated = log || checkpoint;
    EvalResult ev;
    ev.loss = ev.rel_l2 = std::nan("");
    if (validated) {
      last_eval = ev = tr.validate();
      validated_step = r.step;
    }
    const double peak = peak_mib_max(ctx.world());
    const double sps = static_cast<double>(r.samples) / r.t.total;
    if (root && log)
      std::cout << "step " << r.step << "/" << total << " | loss " << fmt(r.loss) << " | "
                << val_text(ev, tr, cfg) << " | " << fmt(sps, 3) << " samples/s | "
                << fmt(r.t.total * 1e3, 3) << " ms/step (compute " << fmt(r.t.compute() * 1e3, 3)
                << ", halo " << fmt(r.t.halo * 1e3, 3) << ", allreduce "
                << fmt(r.t.allreduce * 1e3, 3) << ", all-to-all " << fmt(r.t.alltoall * 1e3, 3)
                << ") | peak " << fmt(peak, 4) << " MiB/rank" << std::endl;
    if (root && log && cfg.train.device_stats) {
      const device::Stats& d = r.dev;
      const auto mib = [](std::uint64_t b) { return fmt(static_cast<double>(b) / (1 << 20), 4); };
      std::cout << "  device (rank 0): h2d " << d.h2d_copies << " copies " << mib(d.h2d_bytes)
                << " MiB | d2h " << d.d2h_copies << " copies " << mib(d.d2h_bytes) << " MiB | d2d "
                << d.d2d_copies << " copies " << mib(d.d2d_bytes) << " MiB | launches "
                << d.launches << " | cudaMalloc " << d.allocs << std::endl;
    }
    {
      std::ostringstream row;
      row << std::setprecision(17) << r.step << ',' << tr.epochs_drawn() << ',' << r.lr << ','
          << r.loss << ',' << (validated ? val_cells(ev) : std::string(",")) << ',' << r.grad_norm
          << ',' << sps << ',' << r.t.total * 1e3 << ',' << r.t.compute() * 1e3 << ','
          << r.t.halo * 1e3 << ',' << r.t.allreduce * 1e3 << ',' << r.t.alltoall * 1e3 << ','
          << peak << '\n';
      try {
        metrics.append(row.str());  // collective: a failed write stops every rank now
      } catch (const Error& e) {
        // The training since the last checkpoint is not lost with it (a full metrics disk
        // need not be the checkpoints'): this step saved first, where its model is sound.
        std::string note;
        try {
          const EvalResult now = validated ? ev : tr.validate();
          if (!std::isfinite(r.loss) ||
              (validating && now.loss_samples > 0 && !std::isfinite(now.loss))) {
            note = "; this step's model is not finite: no checkpoint written";
          } else {
            const std::string path = io::checkpoint_path(cfg.train.checkpoint_dir, r.step);
            tr.save(path);
            note = "; checkpoint " + path + " was written first: --resume continues from step " +
                   std::to_string(r.step);
          }
        } catch (const Error& also) {
          note = std::string("; no checkpoint could be written either: ") + also.what();
        }
        throw Error(e.what() + note);
      }
    }
    if (validated) check_validation(ev, r.step);
    if (checkpoint) save_checkpoint(r.step);
  }
  // Passes drawn by a skipped update: the last update taken ends the run, validated and saved
  // as a last step is.
  if (steps_run > 0 && saved_step != tr.steps_done()) {
    const bool validated_now = validated_step != tr.steps_done();
    if (validated_now) last_eval = tr.validate();
    if (root)
      std::cout << "step " << tr.steps_done() << "/" << tr.total_steps() << " | "
                << val_text(last_eval, tr, cfg) << " (the run's last update)" << std::endl;
    check_validation(last_eval, tr.steps_done());
    save_checkpoint(tr.steps_done());
    // The update's own row went out unvalidated when it ran: its validation gets a row of its
    // own, as step 0's (no loss, so no step's figures), after the checkpoint (a row that
    // cannot be written then loses no training).
    if (validated_now && validating)
      validation_row(tr.steps_done(), tr.epochs_drawn(), last_lr, last_eval);
  }
  // Stopped by the signal before the end: said (the status stays 0: see stop_signal.hpp).
  const bool unfinished = stopped && tr.steps_done() < tr.total_steps();
  if (root && unfinished) {
    std::cout << "tessera-train: stopped by SIG" << cfg.train.stop_signal
              << " (train.stop_signal) at step " << tr.steps_done() << " of " << tr.total_steps()
              << ": ";
    if (saved_step == tr.steps_done())
      std::cout << "checkpoint " << io::checkpoint_path(cfg.train.checkpoint_dir, saved_step)
                << " written; --resume continues from it";
    else
      std::cout << "no update taken since the start, no checkpoint written; --resume starts where "
                   "this run started";
    std::cout << std::endl;
  }
  if (root) {
    const double wall = MPI_Wtime() - t_train;
    std::cout << "done: " << steps_run << " steps in " << fmt(wall, 4) << " s";
    if (steps_run > 0 && tr.validation_samples() > 0)
      std::cout << "; validation loss " << fmt(last_eval.loss) << ", relative L2 "
                << fmt(last_eval.rel_l2);
    std::cout << "; checkpoints in " << cfg.train.checkpoint_dir;
    if (!cfg.train.metrics_csv.empty()) std::cout << "; metrics in " << cfg.train.metrics_csv;
    std::cout << std::endl;
  }
  return 0;
}

}  // namespace

// The checks that can differ between ranks are collective: every rank has the same error
// and leaves with it; an error on some ranks only ends the job within a bounded time
// (run_reporting_errors), one message either way.
int main(int argc, char** argv) {
  hold_stop_signals();  // a stop signal that comes before the config names it is kept
  return run_reporting_errors("tessera-train", argc, argv, run);
}
