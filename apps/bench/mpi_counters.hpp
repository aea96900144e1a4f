#pragma once
// What this rank hands to MPI, counted by wrapping MPI entry points through the MPI
// profiling interface (PMPI): point-to-point sends (the halo exchanges' messages, ring
// hops), non-blocking all-reduces (the gradient sync), all-to-alls (redistributions: FFT
// transposes, Ulysses attention; bytes for other ranks only), all-gathers and blocking
// float64 all-reduces (statistics, slice sums, the loss), so a benchmark reports the bytes a
// step really sends and tessera-train --dry-run can be checked against them. On one node the
// halo exchange passes data through a shared-memory window, not MPI messages;
// TESSERA_NODE_SHARED_FREE_BYTES=0 leaves it no room, so every halo message goes through
// MPI and is counted.
#include <cstdint>

namespace tessera::bench {

struct MpiCounters {
  std::int64_t send_bytes = 0, sends = 0;  // MPI_Isend with data (zero-byte signals left out)
  std::int64_t iallreduce_bytes = 0, iallreduces = 0;
  std::int64_t alltoall_bytes = 0, alltoalls = 0;    // MPI_Alltoallv / MPI_Alltoallw, to others
  std::int64_t allgather_bytes = 0, allgathers = 0;  // MPI_Allgatherv: this rank's block
  std::int64_t reduce_scatter_bytes = 0, reduce_scatters = 0;  // MPI_Reduce_scatter: its buffer
  std::int64_t allreduce_f64_bytes = 0, allreduces_f64 = 0;    // blocking MPI_Allreduce of doubles
};

MpiCounters& mpi_counters();  // this process's counters (reset by assigning {})

}  // namespace tessera::bench
