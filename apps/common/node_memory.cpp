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
                       const std::string& detail, const std::string& advice) {
  MPI_Comm node = MPI_COMM_NULL;
  TESSERA_MPI(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
  int local = 1;
  MPI_Comm_size(node, &local);
  double sum = 0;
  TESSERA_MPI(MPI_Allreduce(&need, &sum, 1, MPI_DOUBLE, MPI_SUM, node));
  MPI_Comm_free(&node);
  const double have = node_available_bytes();
  const auto limit = static_cast<double>(memory_limit());
  const bool node_fits = sum <= have, limit_fits = limit == 0 || need <= limit;
  std::ostringstream os;
  if (!node_fits)
    os << what << " needs about " << memory_text(need) << " per rank" << detail << ", "
       << memory_text(sum) << " for the " << local << " ranks of this node; the node has "
       << memory_text(have) << " available (" << advice << ")";
  else if (!limit_fits)
    os << what << " needs about " << memory_text(need) << " per rank" << detail
       << "; TESSERA_MEMORY_LIMIT_MB allows " << memory_text(limit) << " (" << advice << ")";
  // Every rank of a short node fails alike: one message per node, not "rank 0 of ...".
  collective_check(comm, node_fits && limit_fits, os.str());
}

}  // namespace tessera::app
