#pragma once
// Exact neighbour queries among 3-D points on the host: the k nearest of a query point and
// the points within a radius, through a k-d tree (nanoflann), ordered by (squared distance,
// global id) so that ties break the same way whatever the order or partition of the points.
#include "kernels/floor.hpp"
#include <cstdint>
#include <memory>
#include <vector>

#include "decomp/index.hpp"

namespace tessera::kernels {

struct Neighbor {
  double d2 = 0;         // squared distance
  std::int64_t id = -1;  // global id
  Index index = -1;      // row in the indexed set
  bool operator<(const Neighbor& o) const { return d2 < o.d2 || (d2 == o.d2 && id < o.id); }
};

class PointIndex {
 public:
  // xyz: n rows of 3 doubles, ids: n global ids; both must outlive the index.
  PointIndex(const double* xyz, const std::int64_t* ids, Index n);
  ~PointIndex();
  PointIndex(const PointIndex&) = delete;
  PointIndex& operator=(const PointIndex&) = delete;

  Index size() const { return n_; }
  // The k nearest of q (fewer when the set is smaller), sorted.
  std::vector<Neighbor> knn(const double q[3], Index k) const;
  // Every point with squared distance <= r2, sorted; the first max_points of them if > 0.
  std::vector<Neighbor> within(const double q[3], double r2, Index max_points = 0) const;

 private:
  struct Tree;
  const double* xyz_;
  const std::int64_t* ids_;
  Index n_;
  std::unique_ptr<Tree> tree_;
};

}  // namespace tessera::kernels
