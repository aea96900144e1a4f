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
#include "decomp/mem_space.hpp"

namespace tessera {

struct LocalHits {
  Index keep = 0;
  std::vector<std::int64_t> ids;  // (m, keep) global ids, sorted by (d2, id); -1 past count
  std::vector<double> d2;         // (m, keep) squared distances; +inf past count
  std::vector<Index> count;       // (m) answers per query
};

// xyz: n rows of 3 doubles with global ids; queries: m rows of 3 doubles (host memory).
LocalHits local_search(const double* xyz, const std::int64_t* ids, Index n, const double* queries,
                       Index m, const std::vector<Index>& order, Index keep, double r2,
                       MemSpace space);

}  // namespace tessera
