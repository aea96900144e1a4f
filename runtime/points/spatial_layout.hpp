#pragma once
// SpatialLayout: which rank owns which part of space, for a point cloud spread over the ranks
// of a communicator. Computed collectively by recursive coordinate bisection: each cut's
// plane is the weighted median of the points of its region along the region's longest
// extent, found by bisection on the plane with one all-reduce per step for all regions of a
// level - no rank gathers the points. Every rank holds the same tree, so any rank can say
// who owns a point (owner_of), and each rank's region is one box (the regions tile space).
#include "runtime/floor.hpp"
#include <mpi.h>

#include <vector>

#include "decomp/point_partition.hpp"
#include "runtime/tensor/tensor.hpp"

namespace tessera {

class SpatialLayout {
 public:
  // coords: this rank's points, (n, 3) float64 on the host; weights: (n) float64 or undefined.
  static SpatialLayout rcb(MPI_Comm comm, const Tensor& coords, const Tensor& weights = {});

  int parts() const { return static_cast<int>(region_.size()); }
  const Region3& region(int part) const { return region_.at(static_cast<std::size_t>(part)); }
  // The part owning point p: below a cut plane goes left, on or above it right.
  int owner_of(const Point3& p) const;
  // Owners of every row of (n, 3) coordinates.
  std::vector<int> owners(const Tensor& coords) const;

 private:
  struct Node {
    int dim = -1;  // -1: a leaf
    double plane = 0;
    int left = -1, right = -1;
    int part = -1;  // leaves: the part
  };
  std::vector<Node> nodes_;  // nodes_[0] the root
  std::vector<Region3> region_;
};

}  // namespace tessera
