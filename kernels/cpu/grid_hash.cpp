// Grid hash queries on the host: OpenMP over queries, the functors of grid_hash_impl.hpp.
#include "kernels/cpu/host_loops.hpp"
#include "kernels/grid_hash_impl.hpp"

namespace tessera::kernels {

void cpu::grid_knn(const GridView& g, const double* q, Index nq, Index k, Index* idx, double* d2,
                   Index* count) {
  host_for_each(nq, GridKnnQuery{g, q, k, idx, d2, count});
}

void cpu::grid_within(const GridView& g, const double* q, Index nq, double r2, Index max_points,
                      Index* idx, double* d2, Index* count) {
  host_for_each(nq, GridWithinQuery{g, q, r2, max_points, idx, d2, count});
}

void cpu::grid_count_within(const GridView& g, const double* q, Index nq, double r2, Index* count) {
  host_for_each(nq, GridWithinQuery{g, q, r2, 0, nullptr, nullptr, count});
}

}  // namespace tessera::kernels
