// Case "train": one training step of the demo UNet (width 8, depth 3, GroupNorm, GELU,
// pooling/upsampling, float32; forward, relative-L2 loss, backward with the bucketed
// gradient all-reduce, AdamW) on (batch, 1, H, W) grids split over the ranks along H.
//  strong: a fixed global grid (--strong=256x256, --batch=2) at every rank count;
//  weak:   a fixed grid per rank (--weak=128x128 per rank, H grows with the ranks).
// Per row: the step time (median of --reps, the slowest rank each time) split into compute,
// halo exchange and all-reduce (the slowest rank's split), and the peak memory per rank
// (tensor allocations, the largest rank). Threads: like the conv case, cores per node /
// ranks per node (--threads), so 1 rank uses every core and C ranks one core each.
// Goals: strong-scaling T(1 rank, C threads) / T(2 ranks, 1 thread each) >= 0.85 on C = 2
// cores (the conv case's former method) and the plain efficiency
// E = T(1 rank, 1 thread) / (2 T(2 ranks, 1 thread each)) >= 0.95; weak-scaling peak memory
// per rank at 4 ranks within 10% of 1 rank's. --deterministic=0 measures the cost of the
// fixed halo-adjoint order tessera-train uses by default. At N > 1 ranks, --paired also
// measures E in one launch from one-rank and N-rank steps taken in turn (train_step.hpp):
// separate launches seconds apart see a machine whose speed drifts by 10-30% here.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "apps/bench/cases.hpp"
#include "apps/bench/timing.hpp"
#include "apps/bench/train_step.hpp"
#include "decomp/error.hpp"

namespace tessera::bench {
namespace {

StepSetup step_setup(const cli::Args& opt, Index batch, const std::vector<Index>& grid) {
  StepSetup s;
  s.width = size_option(opt, "width");
  s.depth = int_option(opt, "depth", 0);
  s.batch = batch;
  s.grid = grid;
  s.reps = reps_option(opt);
  s.warmup = int_option(opt, "warmup", 0);
  s.deterministic = opt.integer_in("deterministic", 0, 1) != 0;  // 2 was read as 1
  s.ghost_room = opt.num("ghost-room") != 0;
  s.recompute = opt.integer_in("recompute", 0, 1) != 0;
  return s;
}

json run_one(Context& ctx, const cli::Args& opt, const std::string& scaling, Index batch,
             const std::vector<Index>& grid, int threads) {
  const StepSetup s = step_setup(opt, batch, grid);
  json row = time_train_step(ctx, s);
  row["ghost_room"] = s.ghost_room ? 1 : 0;
  row["recompute"] = s.recompute ? 1 : 0;
  row["scaling"] = scaling;
  row["deterministic"] = s.deterministic ? 1 : 0;
  row["threads"] = threads;
  return row;
}

json run(Context& ctx, const cli::Args& opt) {
  const int threads = opt.has("threads") ? threads_option(opt) : ctx.node_share_threads();
  omp_set_num_threads(threads);
  const Index batch = size_option(opt, "batch");
  json rows = json::array();
  const auto which = opt.choices("which", {"strong", "weak"});
  if (which.count("strong")) {
    const auto grid = grid_option(opt, "strong");
    rows.push_back(run_one(ctx, opt, "strong", batch, grid, threads));
    if (ctx.size() == 1 && threads > 1) {  // the serial baseline of the plain efficiency
      omp_set_num_threads(1);
      rows.push_back(run_one(ctx, opt, "strong", batch, grid, 1));
      omp_set_num_threads(threads);
    }
    const int pairs = int_option(opt, "paired", 0);
    if (ctx.size() > 1 && pairs > 0) {  // E from one-rank and N-rank steps taken in turn
      omp_set_num_threads(1);
      json row = paired_efficiency(ctx, step_setup(opt, batch, grid), pairs);
      row["scaling"] = "paired";
      row["threads"] = 1;
      row["t_step_s"] = row["tN_s"];
      rows.push_back(row);
      omp_set_num_threads(threads);
    }
  }
  if (which.count("weak")) {
    std::vector<Index> g = grid_option(opt, "weak");
    g[0] *= ctx.size();
    rows.push_back(run_one(ctx, opt, "weak", batch, g, threads));
  }
  return rows;
}

// The first row of this scaling and rank count (and thread count, unless 0).
const json* row_of(const json& rows, const std::string& scaling, int ranks, int threads = 0) {
  for (const auto& r : rows)
    if (r.at("scaling") == scaling && r.at("ranks") == ranks &&
        (threads == 0 || r.at("threads") == threads))
      return &r;
  return nullptr;
}

json goals(const json& rows) {
  json g = json::array();
  const json* s1 = row_of(rows, "strong", 1);
  const json* s2 = row_of(rows, "strong", 2);
  if (s1 && s2) {
    const int t1 = (*s1).at("threads");
    g.push_back(goal("strong: T(1 rank, " + std::to_string(t1) + " threads) / T(2 ranks, " +
                         std::to_string(int((*s2).at("threads"))) + " thread each)",
                     double((*s1).at("t_step_s")) / double((*s2).at("t_step_s")), ">=", 0.85));
    // The plain efficiency against one rank on one core: shows whether the ratio above
    // owes more to poor thread scaling at 1 rank than to good rank scaling.
    if (const json* serial = row_of(rows, "strong", 1, 1); serial && (*s2).at("threads") == 1)
      g.push_back(goal("strong: E = T(1 rank, 1 thread) / (2 T(2 ranks, 1 thread each))",
                       double((*serial).at("t_step_s")) / (2 * double((*s2).at("t_step_s"))),
                       ">=", 0.95));
  }
  if (const json* p = row_of(rows, "paired", 2)) {
    char range[64];
    std::snprintf(range, sizeof range, "%.2f-%.2f", double((*p).at("e_min")),
                  double((*p).at("e_max")));
    g.push_back(goal("strong, paired in one launch: median E over " +
                         std::to_string(int((*p).at("pairs"))) + " pairs (range " + range + ")",
                     double((*p).at("e_median")), ">=", 0.95));
  }
  const json* w1 = row_of(rows, "weak", 1);
  const json* w4 = row_of(rows, "weak", 4);
  if (w1 && w4)
    g.push_back(goal("weak: |peak memory per rank at 4 ranks / at 1 rank - 1|",
                     std::fabs(double((*w4).at("peak_mib")) / double((*w1).at("peak_mib")) - 1.0),
                     "<=", 0.10));
  return g;
}

}  // namespace

Case train_case() {
  Case c;
  c.name = "train";
  c.help =
      "training step of the demo UNet: strong and weak scaling over domain ranks, "
      "compute / halo / all-reduce split, peak memory per rank";
  c.options = {{"which", "LIST", "strong, weak or both", "strong,weak"},
               {"strong", "HxW", "grid of the strong-scaling run", "256x256"},
               {"weak", "HxW", "grid per rank of the weak-scaling run", "128x128"},
               {"batch", "N", "samples per step", "2"},
               {"width", "N", "UNet width", "8"},
               {"depth", "N", "UNet depth", "3"},
               {"reps", "N", "timed steps", "5"},
               {"warmup", "N", "untimed steps first", "2"},
               {"paired", "N",
                "at N > 1 ranks, also this many pairs of a one-rank step (rank 0, the others "
                "asleep) and an N-rank step taken in turn: E per pair (0: none)",
                "9"},
               {"deterministic", "0|1",
                "halo-adjoint additions in a fixed order (1, tessera-train's default) or in "
                "arrival order (0)",
                "1"},
               {"ghost-room", "0|1",
                "convs' inputs written into their ghost room (1, tessera-train's default) or "
                "copied into padded buffers (0)",
                "1"},
               {"recompute", "0|1",
                "each UNet block's forward run again in backward, holding less (1; "
                "tessera-train's train.recompute) or its saved tensors kept (0, the default)",
                "0"},
               {"threads", "N", "OpenMP threads per rank (default cores per node / ranks)", ""}};
  c.rank_counts = {1, 2, 4};
  c.columns = {"scaling",      "deterministic", "ghost_room", "recompute",  "ranks",
               "threads",      "shape",         "t_step_s",   "ms_compute", "ms_halo",
               "ms_allreduce", "samples_per_s", "peak_mib"};
  c.run = run;
  c.goals = goals;
  return c;
}

}  // namespace tessera::bench
