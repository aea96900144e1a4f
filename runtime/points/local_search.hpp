#pragma once
// The local search of the distributed neighbour queries (and of the benchmark's ring): every
// query's `keep` nearest points (r2 < 0) or nearest `keep` within squared radius r2, through
// the batched grid-hash kernels on the device of `space` - the host's OpenMP loop, or CUDA
// with the points and queries copied there and the answers back. Queries are searched in
// `order` (a Morton order keeps consecutive searches in cache); answers land by query row.
#include "runtime/floor.hpp"
#include <cstdint>
#include <vector>

#include "decomp/index.hpp"
#include "kernels/grid_hash.hpp"

namespace tessera {

// grid: the grid hash of n points (in host or device memory: the search runs there), ids:
// their global ids by row (host); queries: m rows of 3 doubles (host). Writes, in host
// memory, row i of out_ids / out_d2 (m rows of keep: global ids sorted by (d2, id), then -1
// and +inf) and, if out_count is not null, out_count[i] for query i.
void local_search(const kernels::GridHash& grid, const std::int64_t* ids, const double* queries,
                  Index m, const std::vector<Index>& order, Index keep, double r2,
                  std::int64_t* out_ids, double* out_d2, std::int64_t* out_count);

}  // namespace tessera
