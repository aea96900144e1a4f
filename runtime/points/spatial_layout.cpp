#include "runtime/points/spatial_layout.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "runtime/comm/collective_error.hpp"
#include "runtime/comm/mpi_error.hpp"

namespace tessera {
namespace {

const double kInf = std::numeric_limits<double>::infinity();

Point3 row(const Tensor& c, Index i) {
  const double* p = c.data<double>() + 3 * i;
  return {p[0], p[1], p[2]};
}

// Sums n doubles over comm, summed on rank 0 and sent out, so every rank holds the same bits
// and takes the same decisions from them (an all-reduce need not round alike everywhere).
void sum_everywhere(MPI_Comm comm, double* data, int n) {
  int me = 0;
  TESSERA_MPI(MPI_Comm_rank(comm, &me));
  TESSERA_MPI(MPI_Reduce(me == 0 ? MPI_IN_PLACE : data, data, n, MPI_DOUBLE, MPI_SUM, 0, comm));
  TESSERA_MPI(MPI_Bcast(data, n, MPI_DOUBLE, 0, comm));
}

// Per group g < groups, the bounding box over all ranks of the rows i with group(i) == g
// (group < 0: none), with one all-reduce; a group without rows gets lo = +inf, hi = -inf.
template <class Group>
std::vector<Region3> boxes_everywhere(MPI_Comm comm, const Tensor& coords, std::size_t groups,
                                      const Group& group) {
  std::vector<double> b(6 * groups, kInf);  // per group: lo, then hi negated (one MIN)
  for (Index i = 0; i < coords.shape(0); ++i) {
    const int g = group(i);
    if (g < 0) continue;
    const Point3 p = row(coords, i);
    double* bg = b.data() + 6 * static_cast<std::size_t>(g);
    for (int d = 0; d < 3; ++d)
      bg[d] = std::min(bg[d], p[d]), bg[3 + d] = std::min(bg[3 + d], -p[d]);
  }
  TESSERA_MPI(
      MPI_Allreduce(MPI_IN_PLACE, b.data(), static_cast<int>(b.size()), MPI_DOUBLE, MPI_MIN, comm));
  std::vector<Region3> out(groups);
  for (std::size_t g = 0; g < groups; ++g)
    for (int d = 0; d < 3; ++d) out[g].lo[d] = b[6 * g + d], out[g].hi[d] = -b[6 * g + 3 + d];
  return out;
}

double weight_of(const Tensor& weights, Index i) {
  return weights.defined() ? weights.data<double>()[i] : 1.0;
}

// Collective: a bad point on one rank fails every rank at once (the others would wait in
// the layout's all-reduce until a watch ended the job). Returns the points' bounding box
// over all ranks (empty: lo > hi).
Region3 check_input(MPI_Comm comm, const Tensor& coords, const Tensor& weights) {
  TESSERA_CHECK(coords.space() == MemSpace::Host && coords.dtype() == DType::f64 &&
                    coords.ndim() == 2 && coords.shape(1) == 3 && coords.is_contiguous(),
                "spatial layout: coordinates are a contiguous host (n, 3) float64 tensor, not "
                    << name_of(coords.dtype()) << " " << shape_str(coords.shape()));
  const Index n = coords.shape(0);
  TESSERA_CHECK(!weights.defined() || (weights.dtype() == DType::f64 && weights.numel() == n &&
                                       weights.is_contiguous()),
                "spatial layout: one float64 weight per point");
  Index bad = -1;
  for (Index i = 0; i < 3 * n && bad < 0; ++i)
    if (!std::isfinite(coords.data<double>()[i])) bad = i;
  // Weights are amounts of work: a negative one makes the weighted medians and equal-weight
  // ranges meaningless (the layout came out silently unbalanced).
  Index bad_weight = -1;
  for (Index i = 0; weights.defined() && i < n && bad_weight < 0; ++i) {
    const double w = weights.data<double>()[i];
    if (!(w >= 0) || !std::isfinite(w)) bad_weight = i;
  }
  std::ostringstream os;
  if (bad >= 0)
    os << "spatial layout: coordinate "
       << "xyz"[bad % 3] << " of this rank's point " << bad / 3 << " is "
       << coords.data<double>()[bad] << ", not finite";
  else if (bad_weight >= 0)
    os << "spatial layout: the weight of this rank's point " << bad_weight << " is "
       << weights.data<double>()[bad_weight] << ", not a finite amount >= 0";
  collective_check(comm, bad < 0 && bad_weight < 0, os.str());
  // A cloud so small that squared distances underflow (the scale of 1e-160 and below) has
  // distinct points at squared distance 0: neighbour queries would break those ties
  // differently at each rank count. Refused alike on every rank (the box is global).
  const Region3 all = boxes_everywhere(comm, coords, 1, [](Index) { return 0; }).front();
  double extent = 0;
  for (int d = 0; d < 3; ++d)
    if (all.lo[d] <= all.hi[d]) extent = std::max(extent, all.hi[d] - all.lo[d]);
  TESSERA_CHECK(extent == 0 || extent * extent >= std::numeric_limits<double>::min(),
                "spatial layout: the points span "
                    << extent << ", so squared distances between them underflow (below "
                    << std::numeric_limits<double>::min()
                    << ") and neighbour queries cannot order them; rescale the coordinates");
  return all;
}

}  // namespace

SpatialLayout SpatialLayout::rcb(MPI_Comm comm, const Tensor& coords, const Tensor& weights) {
  check_input(comm, coords, weights);
  const Index n = coords.shape(0);
  int P = 1;
  TESSERA_MPI(MPI_Comm_size(comm, &P));

  SpatialLayout out;
  out.region_.assign(static_cast<std::size_t>(P), Region3{});
  struct Open {
    int node, p0, np;
    Region3 box;
  };
  out.nodes_.push_back({});
  std::vector<Open> open{{0, 0, P, Region3{{-kInf, -kInf, -kInf}, {kInf, kInf, kInf}}}};
  // Index into `open` of each point's region; -1 once its region is a leaf.
  std::vector<int> where(static_cast<std::size_t>(n), 0);
  while (!open.empty()) {
    std::vector<Open> next;
    const std::size_t m = open.size();
    // The points' bounding box per open region (all ranks), and its total weight.
    const std::vector<Region3> box = boxes_everywhere(
        comm, coords, m, [&](Index i) { return where[static_cast<std::size_t>(i)]; });
    std::vector<double> tot(m, 0.0);
    for (Index i = 0; i < n; ++i)
      if (where[static_cast<std::size_t>(i)] >= 0)
        tot[static_cast<std::size_t>(where[static_cast<std::size_t>(i)])] += weight_of(weights, i);
    sum_everywhere(comm, tot.data(), static_cast<int>(m));
    std::vector<int> dim(m, 0);
    std::vector<double> a(m), b(m), target(m);
    for (std::size_t k = 0; k < m; ++k) {
      const Region3& bx = box[k];
      for (int d = 1; d < 3; ++d)
        if (bx.hi[d] - bx.lo[d] > bx.hi[dim[k]] - bx.lo[dim[k]]) dim[k] = d;
      const bool empty = !(bx.lo[0] <= bx.hi[0]);
      a[k] = empty ? 0.0 : bx.lo[dim[k]];
      b[k] = empty ? 0.0 : bx.hi[dim[k]];
      const Open& o = open[k];
      target[k] = o.np > 1 ? tot[k] * (o.np / 2) / o.np : 0.0;
    }
    // Search for each plane: the smallest plane with weight(x < plane) >= target. Each step
    // counts the weight below 63 planes evenly spaced in (a, b) with one all-reduce and keeps
    // the gap holding the answer: 11 steps narrow the interval by 2^66 (as 64 bisections
    // would), and an all-reduce costs far more than the per-point search among 63 planes.
    // A level of leaves only (the last, or the one level of a single part) cuts nothing.
    constexpr int kGaps = 64;
    const bool cuts = std::any_of(open.begin(), open.end(), [](const Open& o) { return o.np > 1; });
    std::vector<double> hist(m * kGaps), plane((kGaps - 1) * m);
    for (int step = 0; cuts && step < 11; ++step) {
      std::fill(hist.begin(), hist.end(), 0.0);
      for (std::size_t k = 0; k < m; ++k)
        for (int j = 1; j < kGaps; ++j)
          plane[k * (kGaps - 1) + j - 1] = a[k] + (b[k] - a[k]) * j / kGaps;
      for (Index i = 0; i < n; ++i) {
        if (where[static_cast<std::size_t>(i)] < 0) continue;
        const auto k = static_cast<std::size_t>(where[static_cast<std::size_t>(i)]);
        const double* c = plane.data() + k * (kGaps - 1);
        // gap j: the planes at or below x number j (the points below plane j lie in gaps < j)
        const auto j =
            std::upper_bound(c, c + kGaps - 1, coords.data<double>()[3 * i + dim[k]]) - c;
        hist[k * kGaps + static_cast<std::size_t>(j)] += weight_of(weights, i);
      }
      sum_everywhere(comm, hist.data(), static_cast<int>(m * kGaps));
      for (std::size_t k = 0; k < m; ++k) {
        const double* c = plane.data() + k * (kGaps - 1);
        double below = 0;
        int j = 1;  // the first plane with enough weight below it, or none (kGaps)
        for (; j < kGaps; ++j)
          if ((below += hist[k * kGaps + static_cast<std::size_t>(j - 1)]) >= target[k]) break;
        if (j < kGaps) {
          b[k] = c[j - 1];
          if (j > 1) a[k] = c[j - 2];
        } else {
          a[k] = c[kGaps - 2];
        }
      }
    }
    std::vector<int> left_of(m), right_of(m);
    for (std::size_t k = 0; k < m; ++k) {
      const Open o = open[k];
      Node& nd = out.nodes_[static_cast<std::size_t>(o.node)];
      if (o.np == 1) {
        nd.part = o.p0;
        out.region_[static_cast<std::size_t>(o.p0)] = o.box;
        left_of[k] = right_of[k] = -1;
        continue;
      }
      const int d = dim[k];
      const double plane = std::clamp(b[k], o.box.lo[d], o.box.hi[d]);
      nd.dim = d;
      nd.plane = plane;
      const int l = static_cast<int>(out.nodes_.size());
      out.nodes_.push_back({});
      out.nodes_.push_back({});
      out.nodes_[static_cast<std::size_t>(o.node)].left = l;
      out.nodes_[static_cast<std::size_t>(o.node)].right = l + 1;
      Region3 lb = o.box, rb = o.box;
      lb.hi[d] = plane;
      rb.lo[d] = plane;
      left_of[k] = static_cast<int>(next.size());
      next.push_back({l, o.p0, o.np / 2, lb});
      right_of[k] = static_cast<int>(next.size());
      next.push_back({l + 1, o.p0 + o.np / 2, o.np - o.np / 2, rb});
    }
    for (Index i = 0; i < n; ++i) {
      auto& k = where[static_cast<std::size_t>(i)];
      if (k < 0) continue;
      const auto kk = static_cast<std::size_t>(k);
      if (left_of[kk] < 0) {
        k = -1;  // its region is a leaf: done
        continue;
      }
      const Node& nd = out.nodes_[static_cast<std::size_t>(open[kk].node)];
      k = coords.data<double>()[3 * i + nd.dim] < nd.plane ? left_of[kk] : right_of[kk];
    }
    open = next;
  }
  return out;
}

SpatialLayout SpatialLayout::sfc(MPI_Comm comm, const Tensor& coords, Curve curve,
                                 const Tensor& weights) {
  // The key box: the points' bounding box over all ranks.
  const Region3 box = check_input(comm, coords, weights);
  const Index n = coords.shape(0);
  int P = 1;
  TESSERA_MPI(MPI_Comm_size(comm, &P));
  SpatialLayout out;
  out.sfc_ = true;
  out.curve_ = curve;
  const bool none = !(box.lo[0] <= box.hi[0]);
  for (int d = 0; d < 3; ++d)
    out.key_lo_[d] = none ? 0.0 : box.lo[d], out.key_hi_[d] = none ? 0.0 : box.hi[d];
  // This rank's keys (once: the owners below come from them too), in order with the weight
  // below each.
  std::vector<std::uint64_t> key(static_cast<std::size_t>(n));
  std::vector<std::pair<std::uint64_t, double>> keys(static_cast<std::size_t>(n));
  for (Index i = 0; i < n; ++i) {
    const auto k = static_cast<std::size_t>(i);
    key[k] = curve_key(row(coords, i), out.key_lo_, out.key_hi_, curve);
    keys[k] = {key[k], weight_of(weights, i)};
  }
  std::sort(keys.begin(), keys.end());
  std::vector<double> below(keys.size() + 1, 0.0);
  for (std::size_t i = 0; i < keys.size(); ++i) below[i + 1] = below[i] + keys[i].second;
  auto weight_below = [&](std::uint64_t c) {  // of this rank's keys < c
    const auto it = std::lower_bound(keys.begin(), keys.end(), std::make_pair(c, -kInf));
    return below[static_cast<std::size_t>(it - keys.begin())];
  };
  double total = below.back();
  sum_everywhere(comm, &total, 1);  // the same targets everywhere
  // Cut j (1..P-1): the smallest key c with weight(keys < c) >= total j / P, searched in
  // (lo, hi] with W(lo) < target <= W(hi): each step counts the weight below 63 keys
  // spread over every open interval with one all-reduce (2^63 keys: 11 steps, then the
  // last <= 64 keys one by one).
  constexpr int kProbe = 63;
  const std::size_t cuts = static_cast<std::size_t>(P - 1);
  std::vector<std::uint64_t> lo(cuts, 0), hi(cuts, std::uint64_t{1} << 63);
  std::vector<double> target(cuts);
  for (std::size_t j = 0; j < cuts; ++j) {
    target[j] = total * static_cast<double>(j + 1) / P;
    if (!(target[j] > 0)) hi[j] = lo[j] + 1;  // no weight: cut at key 1 (nothing below 0)
  }
  std::vector<std::uint64_t> probe(cuts * kProbe);
  std::vector<double> count(cuts * kProbe);
  auto open = [&] {
    for (std::size_t j = 0; j < cuts; ++j)
      if (hi[j] - lo[j] > 1) return true;
    return false;
  };
  while (open()) {
    for (std::size_t j = 0; j < cuts; ++j) {
      const std::uint64_t span = hi[j] - lo[j];
      const std::uint64_t step = span > kProbe + 1 ? span / (kProbe + 1) : 1;
      for (int i = 0; i < kProbe; ++i) {
        // Probes past the interval repeat hi (already known to reach the target).
        const std::uint64_t c = span > static_cast<std::uint64_t>(i + 1)
                                    ? lo[j] + step * static_cast<std::uint64_t>(i + 1)
                                    : hi[j];
        probe[j * kProbe + static_cast<std::size_t>(i)] = c;
        count[j * kProbe + static_cast<std::size_t>(i)] = weight_below(c);
      }
    }
    // The same sums everywhere: every rank takes the same steps (a rank whose search ended
    // early would leave the others waiting).
    sum_everywhere(comm, count.data(), static_cast<int>(count.size()));
    for (std::size_t j = 0; j < cuts; ++j) {
      if (hi[j] - lo[j] <= 1) continue;
      int i = 0;
      while (i < kProbe && count[j * kProbe + static_cast<std::size_t>(i)] < target[j]) ++i;
      if (i < kProbe) hi[j] = std::min(hi[j], probe[j * kProbe + static_cast<std::size_t>(i)]);
      if (i > 0) lo[j] = probe[j * kProbe + static_cast<std::size_t>(i - 1)];
    }
  }
  out.cuts_ = hi;
  // Each part's region: the bounding box of the points it owns (empty: lo > hi).
  out.region_ = boxes_everywhere(comm, coords, static_cast<std::size_t>(P), [&](Index i) {
    return out.owner_of_key(key[static_cast<std::size_t>(i)]);
  });
  return out;
}

int SpatialLayout::owner_of_key(std::uint64_t key) const {
  return static_cast<int>(std::upper_bound(cuts_.begin(), cuts_.end(), key) - cuts_.begin());
}

int SpatialLayout::owner_of(const Point3& p) const {
  if (sfc_) return owner_of_key(curve_key(p, key_lo_, key_hi_, curve_));
  std::size_t k = 0;
  while (nodes_[k].dim >= 0)
    k = static_cast<std::size_t>(p[static_cast<std::size_t>(nodes_[k].dim)] < nodes_[k].plane
                                     ? nodes_[k].left
                                     : nodes_[k].right);
  return nodes_[k].part;
}

std::vector<int> SpatialLayout::owners(const Tensor& coords) const {
  std::vector<int> o(static_cast<std::size_t>(coords.shape(0)));
  for (Index i = 0; i < coords.shape(0); ++i)
    o[static_cast<std::size_t>(i)] = owner_of(row(coords, i));
  return o;
}

}  // namespace tessera
