#pragma once
// What this rank hands to MPI, counted by wrapping MPI entry points through the MPI
// profiling interface (PMPI): point-to-point sends (the halo exchanges' messages) and
// non-blocking all-reduces (the gradient sync), so a benchmark reports the bytes a step
// really sends and tessera-train --dry-run can be checked against them. On one node the
// halo exchange passes data through a shared-memory window, not MPI messages;
// TESSERA_NODE_SHARED_FREE_BYTES=0 leaves it no room, so every halo message goes through
// MPI and is counted.
#include <cstdint>

namespace tessera::bench {

struct MpiCounters {
  std::int64_t send_bytes = 0, sends = 0;  // MPI_Isend with data (zero-byte signals left out)
  std::int64_t iallreduce_bytes = 0, iallreduces = 0;
};

MpiCounters& mpi_counters();  // this process's counters (reset by assigning {})

}  // namespace tessera::bench
