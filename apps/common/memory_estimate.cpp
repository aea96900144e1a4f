#include "apps/common/memory_estimate.hpp"

#include <unistd.h>

#include <fstream>
#include <iomanip>
#include <sstream>
#include <string>

#include "runtime/comm/collective_error.hpp"
#include "runtime/comm/mpi_error.hpp"

namespace tessera::app {
namespace {

// Bytes this node can still give: MemAvailable, else physical memory.
double node_available_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  double kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit)
    if (key == "MemAvailable:") return kib * 1024.0;
  return static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGESIZE));
}

std::string gib(double bytes) {
  std::ostringstream os;
  os << std::setprecision(3) << bytes / double(1 << 30) << " GiB";
  return os.str();
}

}  // namespace

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
  MPI_Comm node = MPI_COMM_NULL;
  TESSERA_MPI(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
  int local = 1, local_rank = 0;
  MPI_Comm_size(node, &local);
  MPI_Comm_rank(node, &local_rank);
  double mine = need.total(), sum = 0;
  TESSERA_MPI(MPI_Allreduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, node));
  MPI_Comm_free(&node);
  const double have = node_available_bytes();
  std::ostringstream os;
  if (sum > have)
    os << "training needs about " << gib(need.total()) << " per rank (data " << gib(need.data)
       << ", parameters and optimizer " << gib(need.parameters) << ", activations "
       << gib(need.activations) << "), " << gib(sum) << " for the " << local
       << " ranks of this node; the node has " << gib(have)
       << " available (a smaller model, batch or grid, or more nodes)";
  collective_check(comm, sum <= have || local_rank != 0, os.str());
}

}  // namespace tessera::app
