#include "apps/common/memory_estimate.hpp"

#include <algorithm>
#include <string>

#include "apps/common/node_memory.hpp"

namespace tessera::app {

int optimizer_states(const OptimConfig& o) {
  if (o.name == "sgd") return o.momentum > 0 ? 1 : 0;
  return 2;  // adam, adamw
}

namespace {
double busiest_block_bytes(const ShardSpec& spec, double es) {
  double b = 0;
  for (const auto& coords : mesh_coords_of(spec)) b = std::max(b, local_elems(spec, coords) * es);
  return b;
}
}  // namespace

MemoryEstimate estimate_training_memory(const Graph& g, const ShardSpec& batch_input,
                                        const ShardSpec& batch_target, DType dtype, int states,
                                        double data_bytes) {
  const double es = static_cast<double>(size_of(dtype));
  MemoryEstimate m;
  m.data = data_bytes;
  // Parameters as bound: this rank's blocks of sharded ones. Value and gradient (GradSync's
  // buckets are views of them), and the optimizer's state.
  for (const auto& np : g.parameters())
    m.parameters += static_cast<double>(np.param->value.numel()) * es * (2.0 + states);
  // Forward keeps every kept output and each op's saved tensors until backward; backward
  // holds an output's gradient and its input's gradient at once, and the largest kernel
  // scratch; the batch (inputs and targets) and the prediction live through the step.
  double kept = 0, largest = 0, scratch = 0;
  for (const NodeCost& c : g.costs({batch_input}, dtype)) {
    kept += (c.kept ? c.out_bytes : 0) + c.cost.saved_bytes;
    largest = std::max(largest, c.out_bytes);
    scratch = std::max(scratch, c.cost.scratch_bytes);
  }
  m.activations = kept + 2.0 * largest + scratch + busiest_block_bytes(batch_input, es) +
                  busiest_block_bytes(batch_target, es);
  return m;
}

namespace {
std::string parts(const MemoryEstimate& m) {
  return "data " + memory_text(m.data) + ", parameters and optimizer " + memory_text(m.parameters) +
         ", activations " + memory_text(m.activations);
}
}  // namespace

std::string describe(const MemoryEstimate& m) {
  return memory_text(m.total()) + " per rank (" + parts(m) + ")";
}

void check_memory_fits(MPI_Comm comm, const MemoryEstimate& need) {
  check_node_memory(comm, need.total(), "training", " (" + parts(need) + ")",
                    "a smaller model, batch or grid, or more nodes");
}

}  // namespace tessera::app
