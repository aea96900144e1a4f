#pragma once
// A per-rank memory estimate of training, from the model and the local shard, made before
// anything large is allocated, so a model too large for the node is refused with numbers
// ("needs X GiB per rank, the node has Y") instead of failing in an allocation midway.
#include <mpi.h>

#include <vector>

#include "runtime/train/unet.hpp"

namespace tessera::app {

struct MemoryEstimate {
  double data = 0;         // the cached input and target fields of this rank's block
  double parameters = 0;   // values, gradients, two optimizer moments, the gradient buckets
  double activations = 0;  // what forward keeps for backward, and backward's gradients
  double total() const { return data + parameters + activations; }
};

// Upper estimate, in bytes per rank. cells: the spatial cells of this rank's block;
// batch: the samples one rank computes per step.
MemoryEstimate estimate_training_memory(const UNetOptions& o, Index samples, Index cells,
                                        Index batch);

// Collective over comm: refuses (on every rank) when the ranks of one node together need
// more than the node's available memory (MemAvailable of /proc/meminfo).
void check_memory_fits(MPI_Comm comm, const MemoryEstimate& need);

}  // namespace tessera::app
