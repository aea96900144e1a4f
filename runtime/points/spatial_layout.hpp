#pragma once
// SpatialLayout: which rank owns which part of space, for a point cloud spread over the ranks
// of a communicator, computed collectively - no rank gathers the points - and the same on
// every rank, so any rank can say who owns a point (owner_of). The searches' sums are made
// on rank 0 and broadcast, so every rank decides from the same bits.
// - rcb: recursive coordinate bisection. Each cut's plane is the weighted median of the
//   points of its region along the region's longest extent, found by a search on the plane
//   with one sum per step for all regions of a level. Each rank's region is one box; the
//   regions tile space.
// - sfc: a space-filling curve (Hilbert or Morton keys over the points' bounding box) cut
//   into ranges of equal weight; the P - 1 cut keys found by a search over the key space with
//   one sum per step for all cuts. Each rank's region is the bounding box of the
//   points it owns (boxes may overlap; a rank without points has an empty one), so a point
//   that was not among the layout's input may lie outside its owner's region: the queries
//   refuse such points.
#include "runtime/floor.hpp"
#include <mpi.h>

#include <cstdint>
#include <vector>

#include "decomp/point_partition.hpp"
#include "runtime/tensor/tensor.hpp"

namespace tessera {

class SpatialLayout {
 public:
  // coords: this rank's points, (n, 3) float64 on the host; weights: (n) float64 or undefined.
  static SpatialLayout rcb(MPI_Comm comm, const Tensor& coords, const Tensor& weights = {});
  static SpatialLayout sfc(MPI_Comm comm, const Tensor& coords, Curve curve = Curve::Hilbert,
                           const Tensor& weights = {});

  int parts() const { return static_cast<int>(region_.size()); }
  const Region3& region(int part) const { return region_.at(static_cast<std::size_t>(part)); }
  // The part owning point p: below a cut plane goes left, on or above it right (rcb); the
  // range its key falls in (sfc).
  int owner_of(const Point3& p) const;
  // Owners of every row of (n, 3) coordinates.
  std::vector<int> owners(const Tensor& coords) const;

 private:
  int owner_of_key(std::uint64_t key) const;  // sfc: the part whose key range holds key
  struct Node {
    int dim = -1;  // -1: a leaf
    double plane = 0;
    int left = -1, right = -1;
    int part = -1;  // leaves: the part
  };
  std::vector<Node> nodes_;  // rcb: nodes_[0] the root
  std::vector<Region3> region_;
  // sfc: the curve over the key box; part p owns keys in [cuts_[p - 1], cuts_[p]).
  bool sfc_ = false;
  Curve curve_ = Curve::Hilbert;
  Point3 key_lo_{}, key_hi_{};
  std::vector<std::uint64_t> cuts_;
};

}  // namespace tessera
