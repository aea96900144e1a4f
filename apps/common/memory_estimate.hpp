#pragma once
// A per-rank memory estimate of training, from the built model's graph and the local shard,
// made before the data is read and before the optimizer and the first step allocate, so a
// model too large for the node is refused with numbers ("needs X GiB per rank, the node has
// Y") instead of failing in an allocation midway (or being killed by the kernel).
#include <mpi.h>

#include <string>

#include "apps/common/config.hpp"
#include "runtime/nn/graph.hpp"

namespace tessera::app {

struct MemoryEstimate {
  double data = 0;         // host: the cached input and target fields of this rank's block
  double parameters = 0;   // values, gradients and optimizer state of this rank's parameters
  double activations = 0;  // what forward keeps for backward, backward's working gradients,
                           // the batch and the largest kernel scratch
  double held = 0;         // of `parameters`: the values and gradients the built model holds
  double host_only = 0;    // of `activations`: host kernels' scratch a device run does not take
  MemSpace space = MemSpace::Host;  // where parameters and activations live
  double total() const { return data + parameters + activations; }
  double host() const { return data + (space == MemSpace::Host ? parameters + activations : 0); }
  double device() const { return space == MemSpace::Host ? 0 : parameters + activations; }
};

// Tensors of optimizer state per parameter element (Adam's two moments, SGD's momentum).
int optimizer_states(const OptimConfig& o);

// What a step holds for backward, from the nodes' costs: kept outputs and saved tensors; with
// recompute (NodeCost::segment), a segment's saved state, the values its own ops hold and the
// copies they make of its inputs only while it runs, so the largest segment's once.
double kept_activation_bytes(const std::vector<NodeCost>& nodes);

// Upper estimate, in bytes per rank, for a training step of the bound graph `g` on batches
// of `batch_input` and `batch_target` (the global batch's specs on the mesh), each op's
// figure the busiest rank's (runtime/nn/op_cost.hpp); `data_bytes`: the cached dataset block
// and the samples' summaries (GridData::cache_bytes).
// A parameter still awaiting its layout (an unbound graph: the dry run) counts 1/`layout_ranks`
// of its value, the even share of the ranks its blocks will spread over.
MemoryEstimate estimate_training_memory(const Graph& g, const ShardSpec& batch_input,
                                        const ShardSpec& batch_target, DType dtype,
                                        int optimizer_states, double data_bytes, MemSpace space,
                                        int layout_ranks = 1);

// "12.5 MiB per rank (data 1 MiB, parameters and optimizer 0.5 MiB, activations 11 MiB)".
std::string describe(const MemoryEstimate& m);

// Collective over comm: refuses (on every rank) when the ranks of one node together need
// more host memory than the node has available (MemAvailable of /proc/meminfo, plus what
// they hold already); when a rank's device part passes its device's free memory (one device
// per rank); or when a memory space's part passes TESSERA_MEMORY_LIMIT_MB.
void check_memory_fits(MPI_Comm comm, const MemoryEstimate& need);

}  // namespace tessera::app
