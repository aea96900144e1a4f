#include "decomp/halo_geometry.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include "decomp/error.hpp"

namespace tessera {

// ---- HaloWidths ------------------------------------------------------------------------------

HaloWidths::HaloWidths(std::vector<Index> left, std::vector<Index> right)
    : left_{std::move(left)}, right_{std::move(right)} {}

HaloWidths HaloWidths::per_block(std::vector<std::vector<Index>> left,
                                 std::vector<std::vector<Index>> right) {
  HaloWidths w;
  w.left_ = std::move(left);
  w.right_ = std::move(right);
  return w;
}

namespace {
const std::vector<Index>& widths_of(const std::vector<std::vector<Index>>& all, bool uniform,
                                    int block, const char* side) {
  const std::size_t i = uniform ? 0 : static_cast<std::size_t>(block);
  if (block < 0 || i >= all.size())
    throw Error(std::string("HaloWidths: no ") + side + " widths for block " +
                std::to_string(block));
  return all[i];
}

// whose: "" for uniform widths, " of block b" for per-block ones.
void check_side(const std::vector<Index>& w, int ndim, const std::string& whose, const char* side) {
  if (static_cast<int>(w.size()) != ndim)
    throw Error("HaloWidths: " + std::string(side) + " widths" + whose + " have " +
                std::to_string(w.size()) + " dims, the partition has " + std::to_string(ndim));
  for (int d = 0; d < ndim; ++d)
    if (w[d] < 0)
      throw Error("HaloWidths: negative " + std::string(side) + " width " + std::to_string(w[d]) +
                  " in dim " + std::to_string(d) + whose);
}
}  // namespace

const std::vector<Index>& HaloWidths::left(int block) const {
  return widths_of(left_, uniform(), block, "left");
}
const std::vector<Index>& HaloWidths::right(int block) const {
  return widths_of(right_, uniform(), block, "right");
}

void HaloWidths::validate(int ndim, int num_blocks) const {
  if (left_.size() != right_.size())
    throw Error("HaloWidths: left widths given for " + std::to_string(left_.size()) +
                " blocks, right widths for " + std::to_string(right_.size()));
  if (!uniform() && static_cast<int>(left_.size()) != num_blocks)
    throw Error("HaloWidths: widths given for " + std::to_string(left_.size()) +
                " blocks, the partition has " + std::to_string(num_blocks) +
                " (give one set for all blocks, or one per block)");
  for (std::size_t b = 0; b < left_.size(); ++b) {
    const std::string whose = uniform() ? "" : " of block " + std::to_string(b);
    check_side(left_[b], ndim, whose, "left");
    check_side(right_[b], ndim, whose, "right");
  }
}

// ---- Geometry helpers ------------------------------------------------------------------------

namespace {

// Floor division for a divisor b > 0 (C++ division truncates toward zero).
Index floor_div(Index a, Index b) {
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}

bool is_zero(const std::vector<Index>& s) {
  return std::all_of(s.begin(), s.end(), [](Index x) { return x == 0; });
}

std::vector<Index> negated(std::vector<Index> s) {
  for (Index& x : s) x = -x;
  return s;
}

// Odometer over the integer box [first, last] (inclusive), last dim fastest.
template <class T, class Fn>
void for_each_point(const std::vector<T>& first, const std::vector<T>& last, Fn&& fn) {
  for (std::size_t d = 0; d < first.size(); ++d)
    if (first[d] > last[d]) return;
  std::vector<T> c = first;
  while (true) {
    fn(c);
    int d = static_cast<int>(c.size()) - 1;
    while (d >= 0 && c[d] == last[d]) c[d] = first[d], --d;
    if (d < 0) return;
    ++c[d];
  }
}

// Calls fn(s) for every periodic image shift s (k * extent in periodic dims, 0 in open
// dims) whose shifted domain meets g. Image k of dim d covers [lo + kL, hi + kL), so the
// k that touch g run from floor((g.lo - lo) / L) to floor((g.hi - 1 - lo) / L): as many
// wraps as the ghost width needs, even beyond one domain extent.
template <class Fn>
void for_each_image_shift(const Box& dom, const std::vector<bool>& periodic, const Box& g,
                          Fn&& fn) {
  if (g.empty() || dom.empty()) return;
  const int nd = dom.ndim;
  std::vector<Index> kmin(nd, 0), kmax(nd, 0);
  for (int d = 0; d < nd; ++d) {
    if (!periodic[d]) continue;
    const Index L = dom.extent(d);
    kmin[d] = floor_div(g.lo[d] - dom.lo[d], L);
    kmax[d] = floor_div(g.hi[d] - 1 - dom.lo[d], L);
  }
  std::vector<Index> s(nd);
  for_each_point(kmin, kmax, [&](const std::vector<Index>& k) {
    for (int d = 0; d < nd; ++d) s[d] = k[d] * dom.extent(d);
    const Box image = intersect(shift(dom, s), g);
    if (!image.empty()) fn(s, image);
  });
}

// Canonical order of the regions a block pair exchanges: (peer, receiver-frame lo corner,
// shift). Regions received by one block are disjoint, so the lo corner alone already tells
// them apart; the shift only makes the order total.
bool canonical_less(int pa, const Box& a, const std::vector<Index>& sa, int pb, const Box& b,
                    const std::vector<Index>& sb) {
  if (pa != pb) return pa < pb;
  for (int d = 0; d < a.ndim; ++d)
    if (a.lo[d] != b.lo[d]) return a.lo[d] < b.lo[d];
  return sa < sb;
}

// g minus keep, as disjoint boxes: peel one slab below and one above keep per dim.
std::vector<Box> subtract(const Box& g, const Box& keep) {
  const Box k = intersect(g, keep);
  if (k.empty()) return g.empty() ? std::vector<Box>{} : std::vector<Box>{g};
  std::vector<Box> out;
  Box rest = g;
  for (int d = 0; d < g.ndim; ++d) {
    Box below = rest, above = rest;
    below.hi[d] = k.lo[d];
    above.lo[d] = k.hi[d];
    if (!below.empty()) out.push_back(below);
    if (!above.empty()) out.push_back(above);
    rest.lo[d] = k.lo[d];
    rest.hi[d] = k.hi[d];
  }
  return out;
}

}  // namespace

// ---- HaloGeometry ----------------------------------------------------------------------------

HaloGeometry::HaloGeometry(const BlockPartition& part, const HaloWidths& widths,
                           const std::vector<bool>& periodic)
    : part_(part), widths_(widths), periodic_(periodic) {
  if (static_cast<int>(periodic.size()) != part.ndim())
    throw Error("HaloGeometry: " + std::to_string(periodic.size()) + " periodic flags for a " +
                std::to_string(part.ndim()) + "-d partition");
  widths.validate(part.ndim(), part.num_blocks());
  plans_.resize(static_cast<std::size_t>(part.num_blocks()));
}

void HaloGeometry::check_block(int block, const char* what) const {
  if (block < 0 || block >= part_.num_blocks())
    throw Error(std::string(what) + ": block " + std::to_string(block) + " out of range [0, " +
                std::to_string(part_.num_blocks()) + ")");
}

Box HaloGeometry::padded_box(int block) const {
  check_block(block, "HaloGeometry::padded_box");
  return grow(part_.block(block), widths_.left(block), widths_.right(block));
}

// Receiver side: for each image of the domain that meets r's padded box, only the blocks
// under that image can contribute, so look them up by offsets instead of scanning all blocks.
std::vector<HaloRecv> HaloGeometry::compute_recvs(int r) const {
  const Box g = padded_box(r);
  const int nd = part_.ndim();
  std::vector<HaloRecv> out;
  auto add = [&](const std::vector<Index>& s, const Box& image) {
    const Box want = shift(image, negated(s));  // the same cells, back inside the domain
    std::vector<int> first(nd), last(nd);
    for (int d = 0; d < nd; ++d)
      part_.blocks_overlapping(d, want.lo[d], want.hi[d], first[d], last[d]);
    const bool unshifted = is_zero(s);
    for_each_point(first, last, [&](const std::vector<int>& c) {
      const int p = part_.id_of(c);
      if (unshifted && p == r) return;  // r's own cells are not ghosts
      const Box region = intersect(shift(part_.block(c), s), g);
      if (!region.empty()) out.push_back({p, region, s});
    });
  };
  for_each_image_shift(part_.domain(), periodic_, g, add);
  std::sort(out.begin(), out.end(), [](const HaloRecv& a, const HaloRecv& b) {
    return canonical_less(a.peer, a.dst, a.shift, b.peer, b.dst, b.shift);
  });
  return out;
}

// Sender side: the same intersections seen from r, i.e. every block q's padded box against
// every image of r. Sorting by the receiver-frame box makes this list, restricted to q,
// equal to q's receives from r, entry for entry.
std::vector<HaloSend> HaloGeometry::compute_sends(int r) const {
  const Box br = part_.block(r);
  std::vector<HaloSend> out;
  if (br.empty()) return out;
  for (int q = 0; q < part_.num_blocks(); ++q) {
    const Box g = padded_box(q);
    auto add = [&](const std::vector<Index>& s, const Box& /*image*/) {
      if (q == r && is_zero(s)) return;
      const Box region = intersect(shift(br, s), g);
      if (!region.empty()) out.push_back({q, shift(region, negated(s)), s});
    };
    for_each_image_shift(part_.domain(), periodic_, g, add);
  }
  std::sort(out.begin(), out.end(), [](const HaloSend& a, const HaloSend& b) {
    return canonical_less(a.peer, shift(a.src, a.shift), a.shift, b.peer, shift(b.src, b.shift),
                          b.shift);
  });
  return out;
}

// Ghost cells with no source: outside the domain in an open dim. Periodic dims have a source
// everywhere, unless the domain has no cells there to wrap onto.
std::vector<Box> HaloGeometry::compute_open(int r) const {
  const Box g = padded_box(r);
  Box sourced = part_.domain();
  for (int d = 0; d < g.ndim; ++d)
    if (periodic_[d] && sourced.extent(d) > 0) sourced.lo[d] = g.lo[d], sourced.hi[d] = g.hi[d];
  return subtract(g, sourced);
}

const HaloPlan& HaloGeometry::plan(int block) const {
  check_block(block, "HaloGeometry::plan");
  std::lock_guard<std::mutex> lock(mu_);
  std::unique_ptr<HaloPlan>& slot = plans_[static_cast<std::size_t>(block)];
  if (slot) return *slot;
  auto p = std::make_unique<HaloPlan>();
  p->recvs = compute_recvs(block);
  p->sends = compute_sends(block);
  p->open = compute_open(block);
  for (const HaloRecv& x : p->recvs) p->cells_received += x.dst.volume();
  for (const HaloSend& x : p->sends) p->cells_sent += x.src.volume();
  for (const Box& b : p->open) p->open_cells += b.volume();
  slot = std::move(p);
  return *slot;
}

std::shared_ptr<const HaloGeometry> cached_halo_geometry(const BlockPartition& part,
                                                         const HaloWidths& widths,
                                                         const std::vector<bool>& periodic) {
  static std::mutex mu;
  static std::vector<std::shared_ptr<const HaloGeometry>> cache;  // most recently used last
  std::lock_guard<std::mutex> lock(mu);
  for (auto it = cache.begin(); it != cache.end(); ++it) {
    const HaloGeometry& g = **it;
    if (g.partition() == part && g.widths() == widths && g.periodic() == periodic) {
      std::rotate(it, it + 1, cache.end());  // now the most recently used
      return cache.back();
    }
  }
  cache.push_back(std::make_shared<const HaloGeometry>(part, widths, periodic));  // validates
  if (cache.size() > kHaloGeometryCacheEntries) cache.erase(cache.begin());
  return cache.back();
}

}  // namespace tessera
