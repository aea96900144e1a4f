#pragma once
// Box: a half-open N-d index range [lo, hi). All decomposition arithmetic
// (partitions, halo regions, redistribution plans) is box intersection.
#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "decomp/host_device.hpp"
#include "decomp/index.hpp"

namespace tessera {

struct Box {
  int ndim = 0;
  Index lo[kMaxDims] = {};
  Index hi[kMaxDims] = {};

  Box() = default;
  Box(std::initializer_list<Index> lo_, std::initializer_list<Index> hi_);
  Box(const std::vector<Index>& lo_, const std::vector<Index>& hi_);
  // [0, shape) - the index space of a tensor of that shape.
  static Box from_shape(const std::vector<Index>& shape);

  TESSERA_HD Index extent(int d) const { return hi[d] > lo[d] ? hi[d] - lo[d] : 0; }
  TESSERA_HD bool empty() const {
    for (int d = 0; d < ndim; ++d)
      if (hi[d] <= lo[d]) return true;
    return false;
  }
  TESSERA_HD Index volume() const {
    if (empty()) return 0;
    Index v = 1;
    for (int d = 0; d < ndim; ++d) v *= hi[d] - lo[d];
    return v;
  }
  TESSERA_HD bool contains(const Index* p) const {
    for (int d = 0; d < ndim; ++d)
      if (p[d] < lo[d] || p[d] >= hi[d]) return false;
    return true;
  }
  bool contains(const Box& b) const;  // every cell of b is in *this (empty b: true)

  std::vector<Index> shape() const;
  std::vector<Index> lower() const { return {lo, lo + ndim}; }
  std::vector<Index> upper() const { return {hi, hi + ndim}; }
  std::string str() const;  // "[0,4)x[2,8)"
};

bool operator==(const Box& a, const Box& b);  // empty boxes of equal rank compare equal
inline bool operator!=(const Box& a, const Box& b) {
  return !(a == b);
}

Box intersect(const Box& a, const Box& b);
Box shift(const Box& b, const std::vector<Index>& by);
// Grows by lo_w on the low side and hi_w on the high side of each dim (negative shrinks).
Box grow(const Box& b, const std::vector<Index>& lo_w, const std::vector<Index>& hi_w);
Box grow(const Box& b, Index w);
Box clip(const Box& b, const Box& to);  // same as intersect; reads better for domain bounds
// `b` in the local coordinates of a buffer that holds `frame` (both global): b - frame.lo.
// The one "global box -> buffer index space" shift.
Box relative_to(const Box& b, const Box& frame);
// The disjoint boxes of `outer` outside `inner` (inner inside outer): per dim, the slabs
// below and above inner, spanning inner's range in earlier dims. Zeroing these zeroes
// exactly the ghost cells of a padded buffer.
std::vector<Box> outside_of(const Box& outer, const Box& inner);

// Row-major linear index of point p inside box b, and its inverse.
TESSERA_HD inline Index linear_index(const Box& b, const Index* p) {
  Index idx = 0;
  for (int d = 0; d < b.ndim; ++d) idx = idx * b.extent(d) + (p[d] - b.lo[d]);
  return idx;
}
TESSERA_HD inline void delinearize(const Box& b, Index idx, Index* p) {
  for (int d = b.ndim - 1; d >= 0; --d) {
    const Index e = b.extent(d);
    p[d] = b.lo[d] + idx % e;
    idx /= e;
  }
}

}  // namespace tessera
