#pragma once
// The folders a training run writes to, checked before step 1, and the lock that keeps a
// second run out of its checkpoint folder. The metrics CSV: apps/common/metrics_log.hpp.
#include <mpi.h>

#include <cstdint>
#include <string>

#include "apps/common/config.hpp"

namespace tessera::app {

// Collective: the checkpoint folder (created if missing) and the metrics file's folder
// (which must exist) take a new file, so a typo fails now and not at the first checkpoint;
// a metrics file named as the checkpoint code names its files there is refused.
void check_writable(MPI_Comm comm, const TrainConfig& cfg);

// Rank 0 holds an exclusive lock on DIR/.tessera-lock while the run lives (the system
// drops it when the process ends, however it ends): two runs in one checkpoint folder
// would overwrite and prune each other's checkpoints. Collective: a folder another run
// holds is refused on every rank, naming that run's host and process.
class CheckpointDirLock {
 public:
  CheckpointDirLock(MPI_Comm comm, const std::string& dir);
  ~CheckpointDirLock();
  CheckpointDirLock(const CheckpointDirLock&) = delete;
  CheckpointDirLock& operator=(const CheckpointDirLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace tessera::app
