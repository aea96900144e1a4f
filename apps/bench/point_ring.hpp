#pragma once
// The baseline of the points case: neighbour queries on index-sharded points without a
// spatial layout. Every rank's block of points passes around the ring (one MPI_Sendrecv of
// its coordinates and ids per step); each rank builds an index on the visiting block,
// searches its own queries in it (in Tessera's query order, for the same cache use) and keeps
// the best answers by (distance, global id). The index is a k-d tree (nanoflann, one search
// and list per query: the ring as the baseline defines it), or Tessera's own grid
// hash with its batched search (a stronger baseline, the same local search on both sides).
#include <mpi.h>

#include <cstdint>
#include <vector>

#include "runtime/tensor/tensor.hpp"

namespace tessera::bench {

struct RingLists {
  Index keep = 0;
  std::vector<std::int64_t> ids;  // (queries, keep), -1 past the last neighbour
  std::vector<double> d2;         // (queries, keep), +inf past the last neighbour
};

enum class RingSearch { KdTree, Grid };

// xyz (n, 3) float64 and ids (n) int64: this rank's points, also its queries.
// r2 < 0: the `keep` nearest; otherwise the nearest `keep` with squared distance <= r2.
RingLists ring_query(MPI_Comm comm, const Tensor& xyz, const Tensor& ids, Index keep, double r2,
                     RingSearch search);

}  // namespace tessera::bench
