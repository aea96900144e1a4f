#pragma once
// tessera-train --dry-run: what one training step of the configured model costs on a given
// global grid split over a given number of domain ranks, without data or communication.
// The model is the one tessera-train builds; each op of its graph reports its own cost from
// the specs (runtime/nn/op_cost.hpp): FLOPs and bytes of its local kernels (forward +
// backward), halo bytes and messages (from the decomp geometry the runtime's exchanges are
// planned with), all-to-all bytes (FFT transposes, Ulysses attention), ring hops, all-gathers
// and activation all-reduces (normalization statistics, slice sums); per step, the loss's
// all-reduce and the parameter-gradient all-reduce. Every figure is the busiest rank's.
// scripts/scaling_model.py turns these into time.
#include <cstdint>
#include <string>
#include <vector>

#include "apps/common/memory_estimate.hpp"
#include "runtime/nn/graph.hpp"
#include "runtime/train/model.hpp"

namespace tessera::app {

struct StepVolumes {
  std::string model;  // "unet", "fno", ...
  int ranks = 1;
  std::vector<Index> input_shape;  // global (N, C, spatial...): N a micro-batch's samples
  // train.accumulate: a step runs this many forwards and backwards of input_shape (each
  // figure below but the gradient all-reduce is one micro-batch's), then one update.
  int micro_batches = 1;
  std::vector<NodeCost> layers;
  Index parameters = 0;
  std::int64_t grad_allreduce_bytes = 0;  // per rank per step (0 on one rank)
  std::int64_t loss_allreduce_bytes =
      0;  // the loss's sums, a sharded gradient norm (0 on one rank)
  std::size_t elem_size = 4;
  // Training memory per rank, the busiest rank's (apps/common/memory_estimate.hpp), without
  // the data cache (the dry run reads no file); mode-sharded weights, whose layout the dry
  // run does not bind, as an even share of the ranks.
  MemoryEstimate memory;  // on the host (tessera-train's check of a host run)
  // Per-step totals over the layers (each the busiest rank's).
  OpCost total() const;
  // With train.recompute: what the replay of each segment's forward adds to a step (in
  // backward), estimated as a third of those layers' step figures (a backward costs about
  // twice its forward: exact for the convolutions, 0.29 for attention), and the halo bytes
  // of the forward's exchanges (half of theirs). Zero without recompute.
  static double replay_flops_of(const NodeCost& l) {
    return l.segment >= 0 ? l.cost.flops / 3 : 0.0;
  }
  static double replay_halo_bytes_of(const NodeCost& l) {
    return l.segment >= 0 ? 0.5 * static_cast<double>(l.cost.halo_bytes) : 0.0;
  }
  double replay_flops() const;
  double replay_halo_bytes() const;
  double activation_bytes() const;  // kept outputs and saved tensors: what backward needs
};

// The step of `model` on a global input of `input_shape` (N, C, spatial...) split along the
// first spatial dim over `ranks` domain ranks, as tessera-train's auto mesh splits it.
// Throws saying why where the model cannot take the input or split, or has an op whose cost
// depends on the data.
StepVolumes dry_run(Model& model, const std::string& model_name,
                    const std::vector<Index>& input_shape, int ranks, DType dtype,
                    bool relative_l2_loss, int optimizer_states = 2);

std::string dry_run_table(const StepVolumes& v);  // one line per layer, then the totals
std::string dry_run_json(const StepVolumes& v);

}  // namespace tessera::app
