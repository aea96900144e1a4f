#include "decomp/box.hpp"

#include <algorithm>
#include <sstream>
#include "decomp/error.hpp"

namespace tessera {
namespace {
void check_rank(std::size_t n) {
  if (n > static_cast<std::size_t>(kMaxDims))
    throw Error("Box: rank " + std::to_string(n) + " exceeds kMaxDims " + std::to_string(kMaxDims));
}
void check_same_rank(const Box& a, const Box& b, const char* what) {
  if (a.ndim != b.ndim)
    throw Error(std::string(what) + ": boxes of rank " + std::to_string(a.ndim) + " and " +
                std::to_string(b.ndim));
}
}  // namespace

Box::Box(std::initializer_list<Index> lo_, std::initializer_list<Index> hi_)
    : Box(std::vector<Index>(lo_), std::vector<Index>(hi_)) {}

Box::Box(const std::vector<Index>& lo_, const std::vector<Index>& hi_) {
  if (lo_.size() != hi_.size()) throw Error("Box: lo and hi of different rank");
  check_rank(lo_.size());
  ndim = static_cast<int>(lo_.size());
  for (int d = 0; d < ndim; ++d) {
    lo[d] = lo_[d];
    hi[d] = hi_[d];
  }
}

Box Box::from_shape(const std::vector<Index>& shape) {
  return Box(std::vector<Index>(shape.size(), 0), shape);
}

bool Box::contains(const Box& b) const {
  check_same_rank(*this, b, "Box::contains");
  if (b.empty()) return true;
  for (int d = 0; d < ndim; ++d)
    if (b.lo[d] < lo[d] || b.hi[d] > hi[d]) return false;
  return true;
}

std::vector<Index> Box::shape() const {
  std::vector<Index> s(ndim);
  for (int d = 0; d < ndim; ++d) s[d] = extent(d);
  return s;
}

std::string Box::str() const {
  std::ostringstream os;
  for (int d = 0; d < ndim; ++d) os << (d ? "x" : "") << '[' << lo[d] << ',' << hi[d] << ')';
  if (ndim == 0) os << "[]";
  return os.str();
}

bool operator==(const Box& a, const Box& b) {
  if (a.ndim != b.ndim) return false;
  if (a.empty() || b.empty()) return a.empty() && b.empty();
  for (int d = 0; d < a.ndim; ++d)
    if (a.lo[d] != b.lo[d] || a.hi[d] != b.hi[d]) return false;
  return true;
}

Box intersect(const Box& a, const Box& b) {
  check_same_rank(a, b, "intersect");
  Box r;
  r.ndim = a.ndim;
  for (int d = 0; d < a.ndim; ++d) {
    r.lo[d] = std::max(a.lo[d], b.lo[d]);
    r.hi[d] = std::max(r.lo[d], std::min(a.hi[d], b.hi[d]));
  }
  return r;
}

Box relative_to(const Box& b, const Box& frame) {
  if (frame.ndim != b.ndim) throw Error("relative_to: rank mismatch");
  Box r = b;
  for (int d = 0; d < b.ndim; ++d) {
    r.lo[d] -= frame.lo[d];
    r.hi[d] -= frame.lo[d];
  }
  return r;
}

std::vector<Box> outside_of(const Box& outer, const Box& inner) {
  if (outer.ndim != inner.ndim) throw Error("outside_of: rank mismatch");
  std::vector<Box> out;
  Box core = outer;  // shrinks to inner dim by dim
  for (int d = 0; d < outer.ndim; ++d) {
    // inner's range in this dim, clamped into outer's (an empty inner leaves lo == hi)
    const Index lo = std::clamp(inner.lo[d], outer.lo[d], std::max(outer.lo[d], outer.hi[d]));
    const Index hi = std::clamp(inner.hi[d], lo, std::max(lo, outer.hi[d]));
    Box below = core, above = core;
    below.hi[d] = lo;
    above.lo[d] = hi;
    if (!below.empty()) out.push_back(below);
    if (!above.empty()) out.push_back(above);
    core.lo[d] = lo;
    core.hi[d] = hi;
  }
  return out;
}

Box shift(const Box& b, const std::vector<Index>& by) {
  if (static_cast<int>(by.size()) != b.ndim) throw Error("shift: rank mismatch");
  Box r = b;
  for (int d = 0; d < b.ndim; ++d) {
    r.lo[d] += by[d];
    r.hi[d] += by[d];
  }
  return r;
}

Box grow(const Box& b, const std::vector<Index>& lo_w, const std::vector<Index>& hi_w) {
  if (static_cast<int>(lo_w.size()) != b.ndim || static_cast<int>(hi_w.size()) != b.ndim)
    throw Error("grow: rank mismatch");
  Box r = b;
  for (int d = 0; d < b.ndim; ++d) {
    r.lo[d] -= lo_w[d];
    r.hi[d] += hi_w[d];
  }
  return r;
}

Box grow(const Box& b, Index w) {
  return grow(b, std::vector<Index>(b.ndim, w), std::vector<Index>(b.ndim, w));
}

Box clip(const Box& b, const Box& to) {
  return intersect(b, to);
}

}  // namespace tessera
