#pragma once
// Timing of collective operations: every repetition starts at a barrier and counts
// the slowest rank; the median over repetitions resists the drift of shared machines.
#include <mpi.h>

#include <functional>

namespace tessera::bench {

struct Timing {
  double median_s = 0, min_s = 0;
};

// Runs fn `warmup` times untimed, then `reps` times timed.
Timing time_collective(MPI_Comm comm, int reps, int warmup, const std::function<void()>& fn);

}  // namespace tessera::bench
