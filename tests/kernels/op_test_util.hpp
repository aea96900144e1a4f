#pragma once
// Helpers of the op-kernel unit tests: random data, conversions, comparisons.
#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "decomp/box.hpp"
#include "decomp/error.hpp"

namespace tessera::test_ops {

inline std::vector<double> random_vector(std::size_t n, std::mt19937& rng, double lo = -1.0,
                                         double hi = 1.0) {
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<double> v(n);
  for (auto& e : v) e = u(rng);
  return v;
}

// Small integers: many ties for max pooling, exact in float32.
inline std::vector<double> random_integers(std::size_t n, std::mt19937& rng, int levels) {
  std::vector<double> v(n);
  for (auto& e : v) e = static_cast<double>(static_cast<int>(rng() % levels));
  return v;
}

template <class T>
std::vector<T> as(const std::vector<double>& v) {
  return std::vector<T>(v.begin(), v.end());
}
template <class T>
std::vector<double> to_double(const std::vector<T>& v) {
  return std::vector<double>(v.begin(), v.end());
}

inline double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return INFINITY;
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

inline double max_abs(const std::vector<double>& a) {
  double m = 0;
  for (double v : a) m = std::max(m, std::abs(v));
  return m;
}

inline double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

inline Index rand_in(std::mt19937& rng, Index lo, Index hi) {  // inclusive
  return lo + static_cast<Index>(rng() % static_cast<unsigned>(hi - lo + 1));
}

// A window of logical shape `shape` (row-major) inside a larger parent buffer with
// random margins on every dim, as a halo-padded shard holds it: element strides of the
// parent, and the window origin as an element offset.
struct StridedWindow {
  std::vector<Index> shape, stride;
  Index origin = 0, parent_size = 1;

  StridedWindow(const std::vector<Index>& shape_, std::mt19937& rng, bool contiguous)
      : shape(shape_), stride(shape_.size()) {
    std::vector<Index> parent(shape.size()), lo(shape.size());
    for (std::size_t d = 0; d < shape.size(); ++d) {
      lo[d] = contiguous ? 0 : rand_in(rng, 0, 2);
      parent[d] = shape[d] + lo[d] + (contiguous ? 0 : rand_in(rng, 0, 2));
    }
    Index s = 1;
    for (std::size_t d = shape.size(); d-- > 0;) {
      stride[d] = s;
      s *= parent[d];
    }
    parent_size = s;
    for (std::size_t d = 0; d < shape.size(); ++d) origin += lo[d] * stride[d];
  }
  Index count() const {
    Index n = 1;
    for (Index e : shape) n *= e;
    return n;
  }
  // Buffer offset of logical element i.
  Index offset(Index i) const {
    Index off = origin;
    for (std::size_t d = shape.size(); d-- > 0;) {
      off += (i % shape[d]) * stride[d];
      i /= shape[d];
    }
    return off;
  }
  template <class T>
  std::vector<T> buffer_with(const std::vector<double>& logical, double fill) const {
    std::vector<T> b(static_cast<std::size_t>(parent_size), static_cast<T>(fill));
    for (Index i = 0; i < count(); ++i) b[offset(i)] = static_cast<T>(logical[i]);
    return b;
  }
  template <class T>
  std::vector<double> gather(const std::vector<T>& b) const {
    std::vector<double> v(static_cast<std::size_t>(count()));
    for (Index i = 0; i < count(); ++i) v[i] = static_cast<double>(b[offset(i)]);
    return v;
  }
  // True if every buffer cell outside the window still holds `fill`.
  template <class T>
  bool outside_untouched(const std::vector<T>& b, double fill) const {
    std::vector<char> in(b.size(), 0);
    for (Index i = 0; i < count(); ++i) in[offset(i)] = 1;
    for (std::size_t k = 0; k < b.size(); ++k)
      if (!in[k] && static_cast<double>(b[k]) != static_cast<double>(static_cast<T>(fill)))
        return false;
    return true;
  }
};

}  // namespace tessera::test_ops
