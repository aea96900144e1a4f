#include "apps/common/node_memory.hpp"

#include <unistd.h>

#include <fstream>
#include <iomanip>
#include <sstream>

#include "kernels/device/memory.hpp"
#include "runtime/comm/collective_error.hpp"
#include "runtime/comm/mpi_error.hpp"

namespace tessera::app {

double node_available_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  double kib = 0;
  while (in >> key >> kib >> unit)
    if (key == "MemAvailable:") return kib * 1024.0;
  return static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGESIZE));
}

double node_share_bytes(MPI_Comm comm) {
  MPI_Comm node = MPI_COMM_NULL;
  TESSERA_MPI(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
  int local = 1;
  MPI_Comm_size(node, &local);
  // One figure per node (the ranks read MemAvailable at different moments), so the ranks of
  // a node that fail on it fail with one message.
  double available = node_available_bytes();
  TESSERA_MPI(MPI_Allreduce(MPI_IN_PLACE, &available, 1, MPI_DOUBLE, MPI_MIN, node));
  MPI_Comm_free(&node);
  return available / local;
}

double peak_mib_max(MPI_Comm comm) {
  double peak =
      static_cast<double>(memory_stats(MemSpace::Host).peak + memory_stats(MemSpace::Cuda).peak) /
      (1 << 20);
  TESSERA_MPI(MPI_Allreduce(MPI_IN_PLACE, &peak, 1, MPI_DOUBLE, MPI_MAX, comm));
  return peak;
}

std::string memory_text(double bytes) {
  std::ostringstream os;
  os << std::setprecision(3);
  if (bytes < double(1 << 30))
    os << bytes / double(1 << 20) << " MiB";
  else
    os << bytes / double(1 << 30) << " GiB";
  return os.str();
}

void check_node_memory(MPI_Comm comm, double need, const std::string& what,
                       const std::string& detail, const std::string& advice, double held) {
  MPI_Comm node = MPI_COMM_NULL;
  TESSERA_MPI(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
  int local = 1;
  MPI_Comm_size(node, &local);
  double sums[2] = {need, held};
  TESSERA_MPI(MPI_Allreduce(MPI_IN_PLACE, sums, 2, MPI_DOUBLE, MPI_SUM, node));
  MPI_Comm_free(&node);
  // What the ranks hold already is part of their need and no longer of MemAvailable.
  const double sum = sums[0], have = node_available_bytes() + sums[1];
  std::ostringstream os;
  if (sum > have)
    os << what << " needs about " << memory_text(need) << " per rank" << detail << ", "
       << memory_text(sum) << " for the " << local << " ranks of this node; the node has "
       << memory_text(have) << " available (" << advice << ")";
  // Every rank of a short node fails alike: one message per node, not "rank 0 of ...".
  collective_check(comm, sum <= have, os.str());
}

}  // namespace tessera::app
