#pragma once
// Spatial partitions of a point cloud over P parts (pure, serial): weighted recursive
// coordinate bisection (RCB: cut the longest side of the current region at the weighted
// median of its points, the parts split in proportion, recursively) and space-filling-curve
// partitions (points ordered along a Morton or Hilbert curve over their bounding box, cut
// into P runs of equal weight). Each part has a region as boxes: RCB regions tile all of
// space (the outermost boxes are unbounded), SFC regions are the bounding boxes of their
// points. The ghost plan says which points lie within r of which other part's region: the
// points another part's neighbour queries may need, however many regions r spans.
#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "decomp/index.hpp"

namespace tessera {

using Point3 = std::array<double, 3>;

struct Region3 {
  Point3 lo, hi;                              // closed box; +-infinity where unbounded
  double distance_to(const Point3& p) const;  // 0 inside
  // The squared distance, summed over x, y, z in the order a pair's squared distance is: a
  // point within r (d2 <= r * r) of any point of the box is within r of the box in floating
  // point too, which the ghost criteria and the query rounds rely on for exactness.
  double distance2_to(const Point3& p) const;
};

struct PointPartition {
  std::vector<int> owner;                    // per point, its part
  std::vector<std::vector<Region3>> region;  // per part, boxes whose union holds its points
  std::vector<double> weight;                // per part, the weight it holds
  double imbalance() const;                  // max / mean part weight (1: perfect)
};

enum class Curve { Morton, Hilbert };
std::string name_of(Curve c);

// weights: one per point, or empty (all 1). Points may repeat or lie on a plane; parts may
// outnumber the points (some get none).
PointPartition rcb_partition(const std::vector<Point3>& pts, const std::vector<double>& weights,
                             int parts);
PointPartition sfc_partition(const std::vector<Point3>& pts, const std::vector<double>& weights,
                             int parts, Curve curve = Curve::Hilbert);

// The key of a point along the curve, 21 bits per dim over the box [lo, hi].
std::uint64_t curve_key(const Point3& p, const Point3& lo, const Point3& hi, Curve c);

// For part `me`: (point index, part) pairs, one per point of `me` and other part whose region
// lies within r of it, sorted by part then point.
std::vector<std::pair<Index, int>> ghost_plan(const PointPartition& part,
                                              const std::vector<Point3>& pts, int me, double r);

}  // namespace tessera
