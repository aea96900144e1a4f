#pragma once
// Exact neighbour queries through a uniform grid hash: the local search of the point family
// on the GPU, where a k-d tree's pointer chasing and recursion do not fit (kernels/
// neighbors.hpp's nanoflann tree is the host's). Points are binned into cubic cells by a
// counting sort; a kNN query scans rings of cells around its own until the ring's distance
// lower bound exceeds the k-th distance found; a ball query scans the cells its ball
// overlaps. Every list is ordered by (squared distance, global id), as the tree's, so both
// give identical neighbours whatever the order of the points. One thread per query; the
// same query functors run on the host (tests, and a host fallback).
#include "kernels/floor.hpp"
#include <cstdint>
#include <vector>

#include "decomp/box.hpp"
#include "kernels/device/device.hpp"
#include "kernels/neighbors.hpp"

namespace tessera::kernels {

// The grid over n points (arrays in one memory space): cell (x, y, z) of side `cell` from
// `lo`, c = (z * dims[1] + y) * dims[0] + x, holds slots cell_start[c] .. cell_start[c + 1]
// of the cell-sorted xyz and ids (a cell's points contiguous: a scan reads memory in order);
// order[slot] is the point's row in the caller's arrays.
struct GridView {
  double lo[3] = {0, 0, 0};
  double cell = 1;
  Index dims[3] = {1, 1, 1};
  const Index* cell_start = nullptr;
  const Index* order = nullptr;
  const double* xyz = nullptr;        // n rows of 3, by slot
  const std::int64_t* ids = nullptr;  // by slot
  Index n = 0;
};

// A grid hash built on the host from host arrays (xyz: n rows of 3, ids: n), with cells
// holding about `per_cell` points on average over the points' bounding box, then held in
// `space` (device arrays for the CUDA queries). The points are copied.
class GridHash {
 public:
  GridHash(const double* xyz, const std::int64_t* ids, Index n, MemSpace space,
           double per_cell = 4);
  ~GridHash();
  GridHash(const GridHash&) = delete;
  GridHash& operator=(const GridHash&) = delete;
  const GridView& view() const { return view_; }
  MemSpace space() const { return space_; }
  Index size() const { return view_.n; }

  // One query at a time on a host grid, as kernels::PointIndex answers them (other ranks'
  // requests in the distributed queries; their own queries go through the batched
  // grid_knn / grid_within): the k nearest, sorted; every point within r2, sorted, the
  // first max_points of them if > 0.
  std::vector<Neighbor> knn(const double q[3], Index k) const;
  std::vector<Neighbor> within(const double q[3], double r2, Index max_points = 0) const;

 private:
  MemSpace space_;
  GridView view_;
  std::vector<std::int64_t> row_ids_;  // host grids: ids by row, for knn/within's lists
  std::vector<void*> owned_;           // arrays allocated in space_
  std::vector<std::size_t> owned_bytes_;
};

// nq queries (rows of 3 doubles in q, in the grid's memory space); per query i, slots
// [i * k, i * k + k) of idx (rows of the indexed set) and d2 get its k nearest in (d2, id)
// order, count[i] = min(k, n).
void grid_knn(const Device& dev, const GridView& g, const double* q, Index nq, Index k, Index* idx,
              double* d2, Index* count);
// Every point with d2 <= r2, the nearest max_points (>= 1) of them, in (d2, id) order: slots
// [i * max_points, ...) and count[i] as above.
void grid_within(const Device& dev, const GridView& g, const double* q, Index nq, double r2,
                 Index max_points, Index* idx, double* d2, Index* count);
// How many points lie within r2 of each query (to size an uncapped grid_within).
void grid_count_within(const Device& dev, const GridView& g, const double* q, Index nq, double r2,
                       Index* count);

namespace cpu {
void grid_knn(const GridView& g, const double* q, Index nq, Index k, Index* idx, double* d2,
              Index* count);
void grid_within(const GridView& g, const double* q, Index nq, double r2, Index max_points,
                 Index* idx, double* d2, Index* count);
void grid_count_within(const GridView& g, const double* q, Index nq, double r2, Index* count);
}  // namespace cpu
namespace cuda {
void grid_knn(const Device& dev, const GridView& g, const double* q, Index nq, Index k, Index* idx,
              double* d2, Index* count);
void grid_within(const Device& dev, const GridView& g, const double* q, Index nq, double r2,
                 Index max_points, Index* idx, double* d2, Index* count);
void grid_count_within(const Device& dev, const GridView& g, const double* q, Index nq, double r2,
                       Index* count);
}  // namespace cuda

}  // namespace tessera::kernels
