// Grid hash queries on CUDA: one thread per query, the functors of grid_hash_impl.hpp.
#include "kernels/cuda/device_loops.cuh"
#include "kernels/grid_hash_impl.hpp"

namespace tessera::kernels {

void cuda::grid_knn(const Device& dev, const GridView& g, const double* q, Index nq, Index k,
                    Index* idx, double* d2, Index* count) {
  cuda_for_each(dev, nq, GridKnnQuery{g, q, k, idx, d2, count}, "grid_knn_cuda");
}

void cuda::grid_within(const Device& dev, const GridView& g, const double* q, Index nq, double r2,
                       Index max_points, Index* idx, double* d2, Index* count) {
  cuda_for_each(dev, nq, GridWithinQuery{g, q, r2, max_points, idx, d2, count}, "grid_within_cuda");
}

void cuda::grid_count_within(const Device& dev, const GridView& g, const double* q, Index nq,
                             double r2, Index* count) {
  cuda_for_each(dev, nq, GridWithinQuery{g, q, r2, 0, nullptr, nullptr, count},
                "grid_count_within_cuda");
}

}  // namespace tessera::kernels
