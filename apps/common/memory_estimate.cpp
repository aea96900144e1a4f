#include "apps/common/memory_estimate.hpp"

#include <string>

#include "apps/common/node_memory.hpp"

namespace tessera::app {

MemoryEstimate estimate_training_memory(const UNetOptions& o, Index samples, Index cells,
                                        Index batch) {
  const double es = o.dtype == DType::f64 ? 8.0 : 4.0;
  const double k = [&] {
    double v = 1;
    for (int d = 0; d < o.nd; ++d) v *= static_cast<double>(o.kernel);
    return v;
  }();
  MemoryEstimate m;
  // The data cache: every sample's block of inputs and targets, in the model's type.
  m.data = static_cast<double>(samples) * static_cast<double>(o.in_channels + o.out_channels) *
           static_cast<double>(cells) * es;
  // Parameters per level: two convs down (c_in -> w, w -> w) and two up (2w -> w, w -> w),
  // w doubling per level; the bottleneck's pair; norms and biases are small beside them.
  double params = k * static_cast<double>(o.in_channels * o.width) +
                  static_cast<double>(o.width * o.out_channels);
  double acts = 0;
  double w = static_cast<double>(o.width), level_cells = static_cast<double>(cells);
  for (int l = 0; l <= o.depth; ++l) {
    params += k * w * w * (l == 0 ? 1.0 : 1.5) + k * 3.0 * w * w;
    // Each level keeps about ten tensors of w channels (conv, norm, activation outputs
    // and their gradients, halo-padded copies) per sample, down and up.
    acts += 10.0 * w * level_cells;
    w *= 2;
    level_cells /= static_cast<double>(1 << o.nd);
  }
  // Value, gradient, two Adam moments, the bucketed gradient copy.
  m.parameters = 5.0 * params * es;
  m.activations = acts * static_cast<double>(batch) * es;
  return m;
}

void check_memory_fits(MPI_Comm comm, const MemoryEstimate& need) {
  const std::string detail = " (data " + gib(need.data) + ", parameters and optimizer " +
                             gib(need.parameters) + ", activations " + gib(need.activations) + ")";
  check_node_memory(comm, need.total(), "training", detail,
                    "a smaller model, batch or grid, or more nodes");
}

}  // namespace tessera::app
