#include "apps/common/node_memory.hpp"

#include <unistd.h>

#include <fstream>
#include <iomanip>
#include <sstream>

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

std::string gib(double bytes) {
  std::ostringstream os;
  os << std::setprecision(3) << bytes / double(1 << 30) << " GiB";
  return os.str();
}

void check_node_memory(MPI_Comm comm, double need, const std::string& what,
                       const std::string& detail, const std::string& advice) {
  MPI_Comm node = MPI_COMM_NULL;
  TESSERA_MPI(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
  int local = 1;
  MPI_Comm_size(node, &local);
  double sum = 0;
  TESSERA_MPI(MPI_Allreduce(&need, &sum, 1, MPI_DOUBLE, MPI_SUM, node));
  MPI_Comm_free(&node);
  const double have = node_available_bytes();
  std::ostringstream os;
  if (sum > have)
    os << what << " needs about " << gib(need) << " per rank" << detail << ", " << gib(sum)
       << " for the " << local << " ranks of this node; the node has " << gib(have)
       << " available (" << advice << ")";
  // Every rank of a short node fails alike: one message per node, not "rank 0 of ...".
  collective_check(comm, sum <= have, os.str());
}

}  // namespace tessera::app
