// Case "scaling": the scaling study of the models' training steps (--models: the UNet and
// the FNO) at 1, 2, 4 and 8 domain ranks, one thread per rank:
//  strong:   a fixed global grid (--strong=256x64, --batch=2) at every rank count;
//  weak:     a fixed grid per rank (--weak=64x64 per rank, H grows with the ranks);
//  capacity: one try of the capacity search of scripts/bench.sh for one model: --rows=M
//            gives the grid (M * ranks * 8) x --capacity-width (8: the UNet's 2^depth),
//            batch --capacity-batch, and two steps run under the per-rank limit
//            TESSERA_MEMORY_LIMIT_MB (which must be set); a grid past the limit fails with
//            the allocator's error, on the rank that passes it.
// Rows: step time and its compute / halo / all-reduce split, peak memory per rank.
// Goals, per model: the largest grid at 8 ranks has >= 7x the cells of the largest at 1
// rank (the weak-scaling claim of domain parallelism); weak-scaling peak memory per rank at
// 8 ranks within 10% of 1 rank's.
#include <omp.h>

#include <algorithm>

#include "apps/bench/cases.hpp"
#include "apps/bench/train_step.hpp"
#include "decomp/error.hpp"
#include "kernels/device/memory.hpp"

namespace tessera::bench {
namespace {

// The step of one model with the options of the command line.
StepSetup setup_of(const cli::Args& opt, const std::string& model) {
  StepSetup s;
  s.model = model;
  const bool fno = model == "fno", transolver = model == "transolver", vit = model == "vit";
  s.width = size_option(opt, fno          ? "fno-width"
                             : transolver ? "transolver-width"
                             : vit        ? "vit-dim"
                                          : "width");
  s.depth = int_option(opt,
                       fno          ? "fno-layers"
                       : transolver ? "transolver-layers"
                       : vit        ? "vit-depth"
                                    : "depth",
                       fno || transolver || vit ? 1 : 0);  // a UNet of depth 0: no levels
  // The benchmark's ViT and Transolver have 4 heads (train_step.cpp; no option sets them).
  TESSERA_CHECK(!(vit || transolver) || s.width % 4 == 0,
                (vit ? "--vit-dim = " : "--transolver-width = ")
                    << s.width << " is not divisible by the benchmark " << model
                    << "'s 4 attention heads");
  s.slices = size_option(opt, "transolver-slices");
  s.attention = opt.str("vit-attention");
  s.modes = size_option(opt, "fno-modes");
  s.fno_weights = opt.str("fno-weights");
  s.vit_positions = opt.str("vit-positions");
  TESSERA_CHECK(s.vit_positions == "sinusoidal" || s.vit_positions == "learned",
                "--vit-positions is sinusoidal or learned, not '" << s.vit_positions << "'");
  TESSERA_CHECK(s.fno_weights == "replicated" || s.fno_weights == "mode_sharded",
                "--fno-weights is replicated or mode_sharded, not '" << s.fno_weights << "'");
  s.batch = size_option(opt, "batch");
  s.recompute = opt.integer_in("recompute", 0, 1) != 0;
  s.reps = reps_option(opt);
  s.warmup = int_option(opt, "warmup", 0);
  return s;
}

json tagged(json row, const std::string& scaling) {
  row["scaling"] = scaling;
  row["threads"] = omp_get_max_threads();
  row["cores"] = omp_get_num_procs();  // more ranks than cores share them (plot.py's ideal)
  return row;
}

// One try of the capacity search, for the one model of --models.
json capacity_try(Context& ctx, const cli::Args& opt) {
  const std::size_t limit = memory_limit();
  if (limit == 0)
    throw Error("scaling --which=capacity needs a per-rank limit: set TESSERA_MEMORY_LIMIT_MB");
  const auto models = opt.list("models");
  if (models.size() != 1) throw Error("scaling --which=capacity takes one model in --models");
  StepSetup s = setup_of(opt, models[0]);
  s.batch = size_option(opt, "capacity-batch");
  s.reps = 1;  // the second step holds the optimizer state too
  s.warmup = 1;
  const Index rows = size_option(opt, "rows");
  s.grid = {rows * ctx.size() * 8, size_option(opt, "capacity-width")};
  json row = tagged(time_train_step(ctx, s), "capacity");
  row["rows"] = rows;
  row["recompute"] = s.recompute ? 1 : 0;
  row["limit_mib"] = static_cast<double>(limit) / (1 << 20);
  return row;
}

json run(Context& ctx, const cli::Args& opt) {
  omp_set_num_threads(threads_option(opt));
  const auto which = opt.choices("which", {"strong", "weak", "capacity"});
  const auto has = [&](const std::string& w) { return which.count(w) > 0; };
  json rows = json::array();
  if (has("capacity")) {
    rows.push_back(capacity_try(ctx, opt));
    return rows;
  }
  // Every model's options checked before the first is timed.
  if (opt.list("models").empty()) throw Error("option --models: an empty list (no model to time)");
  for (const std::string& model : opt.list("models")) setup_of(opt, model);
  for (const std::string& model : opt.list("models")) {
    if (has("strong")) {
      StepSetup s = setup_of(opt, model);
      s.grid = grid_option(opt, "strong");
      rows.push_back(tagged(time_train_step(ctx, s), "strong"));
    }
    if (has("weak")) {
      StepSetup s = setup_of(opt, model);
      s.grid = grid_option(opt, "weak");
      s.grid[0] *= ctx.size();
      rows.push_back(tagged(time_train_step(ctx, s), "weak"));
    }
  }
  return rows;
}

const json* row_of(const json& rows, const std::string& model, const std::string& scaling,
                   int ranks) {
  for (const auto& r : rows)
    if (r.at("model") == model && r.at("scaling") == scaling && r.at("ranks") == ranks) return &r;
  return nullptr;
}

json goals(const json& rows) {
  json g = json::array();
  for (const std::string model : {"unet", "fno", "transolver", "vit"}) {
    const json* c1 = row_of(rows, model, "capacity", 1);
    const json* c8 = row_of(rows, model, "capacity", 8);
    if (c1 && c8)
      g.push_back(goal(model + " capacity: cells of the largest grid at 8 ranks / at 1 rank",
                       double((*c8).at("cells")) / double((*c1).at("cells")), ">=", 7.0));
    const json* w1 = row_of(rows, model, "weak", 1);
    const json* w8 = row_of(rows, model, "weak", 8);
    if (w1 && w8)
      g.push_back(goal(model + " weak: peak memory per rank at 8 ranks / at 1 rank",
                       double((*w8).at("peak_mib")) / double((*w1).at("peak_mib")), "<=", 1.10));
  }
  return g;
}

}  // namespace

Case scaling_case() {
  Case c;
  c.name = "scaling";
  c.help =
      "scaling study of the UNet's, the FNO's, the Transolver's (grid cells as tokens) and the "
      "ViT's training steps: strong and weak scaling, peak "
      "memory per rank, and (driven by scripts/bench.sh) the largest grid under a per-rank "
      "memory limit";
  c.options = {
      {"which", "LIST", "strong, weak (both by default) or capacity", "strong,weak"},
      {"models", "LIST", "unet, fno, transolver, vit (capacity: one of them)",
       "unet,fno,transolver,vit"},
      {"strong", "HxW", "global grid of the strong-scaling runs", "256x64"},
      {"weak", "HxW", "grid per rank of the weak-scaling runs", "64x64"},
      {"batch", "N", "samples per step (strong, weak)", "2"},
      {"width", "N", "UNet width", "8"},
      {"depth", "N", "UNet depth", "3"},
      {"fno-width", "N", "FNO width (projection: twice it)", "16"},
      {"fno-layers", "N", "FNO Fourier blocks", "4"},
      {"fno-modes", "N", "FNO modes per spatial dim", "8"},
      {"fno-weights", "LAYOUT", "FNO spectral weights: replicated or mode_sharded", "replicated"},
      {"vit-positions", "KIND", "ViT position embeddings: sinusoidal or learned", "sinusoidal"},
      {"transolver-width", "N", "Transolver width (4 heads)", "32"},
      {"transolver-layers", "N", "Transolver blocks", "2"},
      {"transolver-slices", "N", "Transolver slices per head", "16"},
      {"vit-dim", "N", "ViT token channels (4 heads, 4x4 patches)", "32"},
      {"vit-depth", "N", "ViT blocks", "2"},
      {"vit-attention", "NAME", "ViT global attention: auto, ring, all_to_all, all_gather", "auto"},
      {"reps", "N", "timed steps", "5"},
      {"warmup", "N", "untimed steps first", "2"},
      {"threads", "N", "OpenMP threads per rank", "1"},
      {"rows", "M", "capacity: grid height M * ranks * 8", "8"},
      {"capacity-width", "W", "capacity: grid width", "64"},
      {"capacity-batch", "N", "capacity: samples per step", "1"},
      {"recompute", "0|1",
       "each model block's forward run again in backward (1: less memory; tessera-train's "
       "train.recompute)",
       "0"}};
  c.rank_counts = {1, 2, 4, 8};
  c.columns = {"model",      "scaling", "ranks",        "shape",    "cells",    "t_step_s",
               "ms_compute", "ms_halo", "ms_allreduce", "peak_mib", "limit_mib"};
  c.run = run;
  c.goals = goals;
  return c;
}

}  // namespace tessera::bench
