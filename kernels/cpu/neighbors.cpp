// PointIndex through nanoflann's k-d tree. Exact ties: the k-th distance found by the tree's
// k-nearest search bounds a radius search that collects every point at that distance, and
// the (distance, id) order picks the k.
#include <nanoflann.hpp>

#include <algorithm>
#include <cmath>
#include <limits>

#include "decomp/error.hpp"
#include "kernels/neighbors.hpp"

namespace tessera::kernels {
namespace {

struct Cloud {
  const double* p;
  std::size_t n;
  std::size_t kdtree_get_point_count() const { return n; }
  double kdtree_get_pt(std::size_t i, std::size_t d) const { return p[3 * i + d]; }
  template <class BBox>
  bool kdtree_get_bbox(BBox&) const {
    return false;
  }
};

// The nearest `cap` points below a bound: a k-nearest search pruned at the bound from the
// start, so a capped ball query in a dense cluster never collects the whole ball.
struct CappedResult {
  std::size_t cap, count;
  double bound;
  std::size_t* idx;
  double* d2;
  bool full() const { return count == cap; }
  double worstDist() const { return count < cap ? bound : d2[cap - 1]; }
  bool addPoint(double dist, std::size_t index) {
    if (!(dist < worstDist())) return true;
    std::size_t i = count < cap ? count++ : cap - 1;  // full: the worst drops out
    for (; i > 0 && d2[i - 1] > dist; --i) d2[i] = d2[i - 1], idx[i] = idx[i - 1];
    d2[i] = dist;
    idx[i] = index;
    return true;
  }
};

using KdTree = nanoflann::KDTreeSingleIndexAdaptor<nanoflann::L2_Simple_Adaptor<double, Cloud>,
                                                   Cloud, 3, std::size_t>;

}  // namespace

struct PointIndex::Tree {
  Cloud cloud;
  KdTree tree;
  Tree(const double* p, std::size_t n)
      : cloud{p, n}, tree(3, cloud, nanoflann::KDTreeSingleIndexAdaptorParams(16)) {
    if (n > 0) tree.buildIndex();
  }
};

PointIndex::PointIndex(const double* xyz, const std::int64_t* ids, Index n)
    : xyz_(xyz), ids_(ids), n_(n) {
  TESSERA_CHECK(n >= 0 && (n == 0 || (xyz && ids)), "PointIndex: " << n << " points without data");
  tree_ = std::make_unique<Tree>(xyz, static_cast<std::size_t>(n));
}

PointIndex::~PointIndex() = default;

std::vector<Neighbor> PointIndex::within(const double q[3], double r2, Index max_points) const {
  std::vector<Neighbor> out;
  if (n_ == 0 || !(r2 >= 0)) return out;
  // nanoflann keeps distances strictly below its radius: widen it by one ulp-scale step,
  // then keep exactly d2 <= r2.
  auto widen = [](double x) {
    return std::isinf(x)
               ? x
               : std::nextafter(x, std::numeric_limits<double>::infinity()) * (1 + 1e-12) + 1e-300;
  };
  double wide = widen(r2);
  if (max_points > 0 && max_points < n_ && !std::isinf(r2)) {
    // One more than asked, within the radius: if all of them lie in range with a clear gap
    // after the max_points-th (far wider than the tree's rounding), those are the answer;
    // otherwise a radius search, as tight as the max_points-th distance allows.
    const std::size_t cap = static_cast<std::size_t>(max_points) + 1;
    std::vector<std::size_t> idx(cap);
    std::vector<double> d2(cap);
    CappedResult rs{cap, 0, wide, idx.data(), d2.data()};
    tree_->tree.findNeighbors(rs, q, nanoflann::SearchParams());
    for (std::size_t j = 0; j < rs.count; ++j) {
      double s = 0;
      for (int d = 0; d < 3; ++d) {
        const double e = xyz_[3 * idx[j] + static_cast<std::size_t>(d)] - q[d];
        s += e * e;
      }
      if (s <= r2) out.push_back({s, ids_[idx[j]], static_cast<Index>(idx[j])});
    }
    std::sort(out.begin(), out.end());
    if (rs.count < cap) return out;  // every point in range
    if (out.size() == cap) {
      const double kth = out[cap - 2].d2;
      if (out[cap - 1].d2 > kth * (1 + 1e-12) + 1e-300) {
        out.pop_back();
        return out;
      }
      r2 = kth;  // the answer lies within the max_points-th distance
      wide = widen(r2);
    }
    out.clear();
  }
  std::vector<std::pair<std::size_t, double>> hits;
  if (std::isinf(r2)) {
    for (Index i = 0; i < n_; ++i) hits.push_back({static_cast<std::size_t>(i), 0.0});
    for (auto& h : hits) {
      double s = 0;
      for (int d = 0; d < 3; ++d) {
        const double e = xyz_[3 * h.first + static_cast<std::size_t>(d)] - q[d];
        s += e * e;
      }
      h.second = s;
    }
  } else {
    nanoflann::SearchParams params;
    params.sorted = false;
    tree_->tree.radiusSearch(q, wide, hits, params);
  }
  for (const auto& [i, d2] : hits) {
    double s = 0;  // recomputed exactly as the brute force would
    for (int d = 0; d < 3; ++d) {
      const double e = xyz_[3 * i + static_cast<std::size_t>(d)] - q[d];
      s += e * e;
    }
    (void)d2;
    if (s <= r2) out.push_back({s, ids_[i], static_cast<Index>(i)});
  }
  std::sort(out.begin(), out.end());
  if (max_points > 0 && static_cast<Index>(out.size()) > max_points)
    out.resize(static_cast<std::size_t>(max_points));
  return out;
}

std::vector<Neighbor> PointIndex::knn(const double q[3], Index k) const {
  if (n_ == 0 || k <= 0) return {};
  const std::size_t kk = static_cast<std::size_t>(std::min(k, n_));
  std::vector<std::size_t> idx(kk);
  std::vector<double> d2(kk);
  nanoflann::KNNResultSet<double, std::size_t> rs(kk);
  rs.init(idx.data(), d2.data());
  tree_->tree.findNeighbors(rs, q, nanoflann::SearchParams());
  double kth = 0;  // the k-th distance, recomputed exactly
  for (std::size_t j = 0; j < kk; ++j) {
    double s = 0;
    for (int d = 0; d < 3; ++d) {
      const double e = xyz_[3 * idx[j] + static_cast<std::size_t>(d)] - q[d];
      s += e * e;
    }
    kth = std::max(kth, s);
  }
  return within(q, kth, k);
}

}  // namespace tessera::kernels
