#pragma once
// What one node can give the ranks on it, and the collective refusal when they would need
// more - made before anything large is allocated (or any file created), so a problem too
// large for the node fails on every rank with numbers ("needs X GiB per rank, the node has
// Y") instead of in an allocation midway, or inside HDF5 for a file of absurd size.
#include <mpi.h>

#include <string>

namespace tessera::app {

double node_available_bytes();  // MemAvailable of /proc/meminfo, else physical memory
// Collective over comm: node_available_bytes() (the least any rank of the node read) over
// the ranks of comm on this node; the same on every rank of a node.
double node_share_bytes(MPI_Comm comm);
std::string memory_text(double bytes);  // "1.5 GiB", or "12.5 MiB" below a GiB
// Collective: the busiest rank's peak of tracked memory (tensors, kernel scratch), host and
// device together, in MiB.
double peak_mib_max(MPI_Comm comm);

// Collective over comm: this rank needs `need` bytes for `what` ("training", "the Darcy
// solve"); `detail` (may be empty) follows the per-rank figure, `advice` ends the message.
// Refuses on every rank when the ranks of one node together need more than it has. `held`:
// the part of `need` the rank holds already (no longer counted in MemAvailable).
void check_node_memory(MPI_Comm comm, double need, const std::string& what,
                       const std::string& detail, const std::string& advice, double held = 0);

}  // namespace tessera::app
