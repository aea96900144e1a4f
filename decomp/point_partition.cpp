#include "decomp/point_partition.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "decomp/error.hpp"

namespace tessera {
namespace {

const double kInf = std::numeric_limits<double>::infinity();

double weight_of(const std::vector<double>& w, Index i) {
  return w.empty() ? 1.0 : w[static_cast<std::size_t>(i)];
}

void check_inputs(const std::vector<Point3>& pts, const std::vector<double>& w, int parts) {
  TESSERA_CHECK(parts >= 1, "point partition: " << parts << " parts");
  TESSERA_CHECK(w.empty() || w.size() == pts.size(),
                "point partition: " << w.size() << " weights for " << pts.size() << " points");
  for (double x : w) TESSERA_CHECK(x >= 0 && std::isfinite(x), "point partition: weight " << x);
  for (const Point3& p : pts)
    for (double c : p)
      TESSERA_CHECK(std::isfinite(c), "point partition: a coordinate is not finite");
}

void finish(PointPartition& out, const std::vector<double>& w) {
  for (std::size_t i = 0; i < out.owner.size(); ++i)
    out.weight[static_cast<std::size_t>(out.owner[i])] += weight_of(w, static_cast<Index>(i));
}

// RCB over points idx[first, last) for parts [p0, p0 + np) within region `box`.
void bisect(const std::vector<Point3>& pts, const std::vector<double>& w, std::vector<Index>& idx,
            std::size_t first, std::size_t last, int p0, int np, Region3 box, PointPartition& out) {
  if (np == 1) {
    for (std::size_t k = first; k < last; ++k) out.owner[static_cast<std::size_t>(idx[k])] = p0;
    out.region[static_cast<std::size_t>(p0)] = {box};
    return;
  }
  const int left = np / 2;
  // The longest side of the points' bounding box (the region may be unbounded).
  Point3 lo{kInf, kInf, kInf}, hi{-kInf, -kInf, -kInf};
  for (std::size_t k = first; k < last; ++k)
    for (int d = 0; d < 3; ++d) {
      lo[d] = std::min(lo[d], pts[static_cast<std::size_t>(idx[k])][d]);
      hi[d] = std::max(hi[d], pts[static_cast<std::size_t>(idx[k])][d]);
    }
  int dim = 0;
  for (int d = 1; d < 3; ++d)
    if (hi[d] - lo[d] > hi[dim] - lo[dim]) dim = d;
  // Sort along dim (ties by index: deterministic) and cut where the weight reaches left/np.
  std::sort(idx.begin() + static_cast<std::ptrdiff_t>(first),
            idx.begin() + static_cast<std::ptrdiff_t>(last), [&](Index a, Index b) {
              const double xa = pts[static_cast<std::size_t>(a)][dim],
                           xb = pts[static_cast<std::size_t>(b)][dim];
              return xa < xb || (xa == xb && a < b);
            });
  double total = 0;
  for (std::size_t k = first; k < last; ++k) total += weight_of(w, idx[k]);
  const double target = total * left / np;
  std::size_t cut = first;
  double acc = 0;
  while (cut < last && acc + weight_of(w, idx[cut]) / 2 < target) acc += weight_of(w, idx[cut++]);
  double plane;
  if (last == first)
    plane = std::isfinite(box.lo[dim]) && std::isfinite(box.hi[dim])
                ? (box.lo[dim] + box.hi[dim]) / 2
                : 0.0;
  else if (cut == first)
    plane = pts[static_cast<std::size_t>(idx[first])][dim];
  else if (cut == last)
    plane = pts[static_cast<std::size_t>(idx[last - 1])][dim];
  else
    plane = (pts[static_cast<std::size_t>(idx[cut - 1])][dim] +
             pts[static_cast<std::size_t>(idx[cut])][dim]) /
            2;
  plane = std::clamp(plane, box.lo[dim], box.hi[dim]);
  Region3 lbox = box, rbox = box;
  lbox.hi[dim] = plane;
  rbox.lo[dim] = plane;
  bisect(pts, w, idx, first, cut, p0, left, lbox, out);
  bisect(pts, w, idx, cut, last, p0 + left, np - left, rbox, out);
}

std::uint64_t spread3(std::uint64_t x) {  // 21 bits -> every third bit
  x &= 0x1fffff;
  x = (x | x << 32) & 0x1f00000000ffffULL;
  x = (x | x << 16) & 0x1f0000ff0000ffULL;
  x = (x | x << 8) & 0x100f00f00f00f00fULL;
  x = (x | x << 4) & 0x10c30c30c30c30c3ULL;
  x = (x | x << 2) & 0x1249249249249249ULL;
  return x;
}

// Hilbert index of (x, y, z) with `bits` bits each (Skilling's transpose algorithm).
std::uint64_t hilbert3(std::uint32_t x[3], int bits) {
  const std::uint32_t m = 1u << (bits - 1);
  for (std::uint32_t q = m; q > 1; q >>= 1) {  // inverse undo excess work
    const std::uint32_t p = q - 1;
    for (int i = 0; i < 3; ++i) {
      if (x[i] & q)
        x[0] ^= p;
      else {
        const std::uint32_t t = (x[0] ^ x[i]) & p;
        x[0] ^= t;
        x[i] ^= t;
      }
    }
  }
  for (int i = 1; i < 3; ++i) x[i] ^= x[i - 1];  // Gray encode
  std::uint32_t t = 0;
  for (std::uint32_t q = m; q > 1; q >>= 1)
    if (x[2] & q) t ^= q - 1;
  for (int i = 0; i < 3; ++i) x[i] ^= t;
  std::uint64_t h = 0;  // interleave the transposed bits, most significant first
  for (int b = bits - 1; b >= 0; --b)
    for (int i = 0; i < 3; ++i) h = (h << 1) | ((x[i] >> b) & 1u);
  return h;
}

}  // namespace

double Region3::distance2_to(const Point3& p) const {
  double s = 0;
  for (int d = 0; d < 3; ++d) {
    const double e = p[d] < lo[d] ? lo[d] - p[d] : p[d] > hi[d] ? p[d] - hi[d] : 0.0;
    s += e * e;
  }
  return s;
}

double Region3::distance_to(const Point3& p) const {
  return std::sqrt(distance2_to(p));
}

double PointPartition::imbalance() const {
  double mx = 0, sum = 0;
  for (double x : weight) {
    mx = std::max(mx, x);
    sum += x;
  }
  return sum > 0 ? mx / (sum / static_cast<double>(weight.size())) : 1.0;
}

std::string name_of(Curve c) {
  return c == Curve::Morton ? "morton" : "hilbert";
}

std::uint64_t curve_key(const Point3& p, const Point3& lo, const Point3& hi, Curve c) {
  std::uint32_t q[3];
  for (int d = 0; d < 3; ++d) {
    const double ext = hi[d] - lo[d];
    const double f = ext > 0 ? (p[d] - lo[d]) / ext : 0.0;
    q[d] = static_cast<std::uint32_t>(std::clamp(f, 0.0, 1.0) * ((1u << 21) - 1));
  }
  if (c == Curve::Morton) return spread3(q[0]) << 2 | spread3(q[1]) << 1 | spread3(q[2]);
  return hilbert3(q, 21);
}

PointPartition rcb_partition(const std::vector<Point3>& pts, const std::vector<double>& w,
                             int parts) {
  check_inputs(pts, w, parts);
  PointPartition out;
  out.owner.assign(pts.size(), 0);
  out.region.assign(static_cast<std::size_t>(parts), {});
  out.weight.assign(static_cast<std::size_t>(parts), 0.0);
  std::vector<Index> idx(pts.size());
  std::iota(idx.begin(), idx.end(), Index{0});
  bisect(pts, w, idx, 0, idx.size(), 0, parts, Region3{{-kInf, -kInf, -kInf}, {kInf, kInf, kInf}},
         out);
  finish(out, w);
  return out;
}

PointPartition sfc_partition(const std::vector<Point3>& pts, const std::vector<double>& w,
                             int parts, Curve curve) {
  check_inputs(pts, w, parts);
  PointPartition out;
  out.owner.assign(pts.size(), 0);
  out.region.assign(static_cast<std::size_t>(parts), {});
  out.weight.assign(static_cast<std::size_t>(parts), 0.0);
  Point3 lo{kInf, kInf, kInf}, hi{-kInf, -kInf, -kInf};
  for (const Point3& p : pts)
    for (int d = 0; d < 3; ++d) lo[d] = std::min(lo[d], p[d]), hi[d] = std::max(hi[d], p[d]);
  std::vector<std::pair<std::uint64_t, Index>> keys(pts.size());
  for (std::size_t i = 0; i < pts.size(); ++i)
    keys[i] = {curve_key(pts[i], lo, hi, curve), static_cast<Index>(i)};
  std::sort(keys.begin(), keys.end());
  double total = 0;
  for (std::size_t i = 0; i < pts.size(); ++i) total += weight_of(w, static_cast<Index>(i));
  double acc = 0;
  for (const auto& [key, i] : keys) {
    const double wi = weight_of(w, i);
    // The part whose share of the weight holds this point's midpoint along the curve.
    const int p =
        total > 0 ? std::min(parts - 1, static_cast<int>((acc + wi / 2) / total * parts)) : 0;
    acc += wi;
    out.owner[static_cast<std::size_t>(i)] = p;
  }
  std::vector<Region3> box(static_cast<std::size_t>(parts),
                           Region3{{kInf, kInf, kInf}, {-kInf, -kInf, -kInf}});
  std::vector<bool> any(static_cast<std::size_t>(parts), false);
  for (std::size_t i = 0; i < pts.size(); ++i) {
    Region3& b = box[static_cast<std::size_t>(out.owner[i])];
    any[static_cast<std::size_t>(out.owner[i])] = true;
    for (int d = 0; d < 3; ++d)
      b.lo[d] = std::min(b.lo[d], pts[i][d]), b.hi[d] = std::max(b.hi[d], pts[i][d]);
  }
  for (int p = 0; p < parts; ++p)
    if (any[static_cast<std::size_t>(p)])
      out.region[static_cast<std::size_t>(p)] = {box[static_cast<std::size_t>(p)]};
  finish(out, w);
  return out;
}

std::vector<std::pair<Index, int>> ghost_plan(const PointPartition& part,
                                              const std::vector<Point3>& pts, int me, double r) {
  TESSERA_CHECK(r >= 0, "ghost plan: radius " << r);
  std::vector<std::pair<Index, int>> out;
  const int parts = static_cast<int>(part.region.size());
  for (int q = 0; q < parts; ++q) {
    if (q == me) continue;
    for (std::size_t i = 0; i < pts.size(); ++i) {
      if (part.owner[i] != me) continue;
      for (const Region3& b : part.region[static_cast<std::size_t>(q)])
        if (b.distance2_to(pts[i]) <= r * r) {
          out.push_back({static_cast<Index>(i), q});
          break;
        }
    }
  }
  return out;
}

}  // namespace tessera
