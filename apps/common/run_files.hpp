#pragma once
// The files a training run writes besides checkpoints: their folders checked before
// step 1, and the metrics CSV cut back to the step a resumed run continues from.
#include <mpi.h>

#include <cstdint>
#include <string>

#include "apps/common/config.hpp"

namespace tessera::app {

// Collective: the checkpoint folder (created if missing) and the metrics file's folder
// (which must exist) take a new file, so a typo fails now and not at the first checkpoint.
void check_writable(MPI_Comm comm, const TrainConfig& cfg);

// Keeps the header and the rows of steps <= step (rows a failed run wrote after its last
// checkpoint would appear twice); written to a temporary file and renamed.
void truncate_metrics(const std::string& path, std::int64_t step);

}  // namespace tessera::app
