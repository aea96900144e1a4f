#include <catch2/catch.hpp>

#include <algorithm>
#include <random>
#include <sstream>
#include <thread>
#include <tuple>

#include "decomp/error.hpp"
#include "decomp/halo_geometry.hpp"

using namespace tessera;

namespace {

constexpr Index kMarker = -1;  // never a global linear index

template <class Fn>
void for_each_cell(const Box& b, Fn&& fn) {
  std::vector<Index> p(static_cast<std::size_t>(b.ndim));
  for (Index i = 0; i < b.volume(); ++i) {
    delinearize(b, i, p.data());
    fn(p);
  }
}

// The oracle, written independently of the plan: the global cell a ghost cell mirrors,
// or false for an open-boundary cell.
bool wrap(const Box& dom, const std::vector<bool>& periodic, std::vector<Index>& p) {
  for (int d = 0; d < dom.ndim; ++d) {
    const Index L = dom.extent(d);
    if (periodic[d] && L > 0) {
      p[d] = dom.lo[d] + ((p[d] - dom.lo[d]) % L + L) % L;
    } else if (p[d] < dom.lo[d] || p[d] >= dom.hi[d]) {
      return false;
    }
  }
  return true;
}

std::vector<HaloSend> sends_to(const HaloPlan& plan, int peer) {
  std::vector<HaloSend> out;
  for (const auto& s : plan.sends)
    if (s.peer == peer) out.push_back(s);
  return out;
}
std::vector<HaloRecv> recvs_from(const HaloPlan& plan, int peer) {
  std::vector<HaloRecv> out;
  for (const auto& r : plan.recvs)
    if (r.peer == peer) out.push_back(r);
  return out;
}

// (peer, lo corner, shift) strictly increasing: the canonical order, with no duplicates.
template <class Entry, class BoxOf>
bool canonically_sorted(const std::vector<Entry>& v, BoxOf dst_of) {
  auto key = [&](const Entry& e) {
    const Box b = dst_of(e);
    return std::make_tuple(e.peer, b.lower(), e.shift);
  };
  for (std::size_t i = 1; i < v.size(); ++i)
    if (!(key(v[i - 1]) < key(v[i]))) return false;
  return true;
}

struct Case {
  BlockPartition part;
  HaloWidths widths;
  std::vector<bool> periodic;
  std::string str;  // for failure messages
};

std::string vec_str(const std::vector<Index>& v) {
  std::ostringstream os;  // built in one stream: GCC 12 misreads "(" + str (-Wrestrict)
  os << '(';
  for (std::size_t i = 0; i < v.size(); ++i) os << (i ? "," : "") << v[i];
  os << ')';
  return os.str();
}

// Random domain, grid, uneven sizes (empty blocks included), asymmetric per-block or uniform
// widths (wider than thin neighbours and, in periodic dims, than the domain), random periodicity.
Case random_case(std::mt19937& rng, int ndim) {
  auto u = [&](Index lo, Index hi) { return std::uniform_int_distribution<Index>(lo, hi)(rng); };
  Case c;
  Box dom;
  dom.ndim = ndim;
  std::vector<int> grid(ndim);
  for (int d = 0; d < ndim; ++d) {
    dom.lo[d] = u(-3, 3);
    dom.hi[d] = dom.lo[d] + (u(0, 9) == 0 ? 0 : u(1, 6));
    grid[d] = static_cast<int>(u(1, ndim == 1 ? 5 : 3));
    c.periodic.push_back(u(0, 1) == 1);
  }
  if (u(0, 2) == 0) {
    c.part = BlockPartition(dom, grid);  // balanced; empty blocks when extent < grid
  } else {
    std::vector<std::vector<Index>> sizes(ndim);
    for (int d = 0; d < ndim; ++d) {
      sizes[d].assign(grid[d], 0);
      for (Index i = 0; i < dom.extent(d); ++i) ++sizes[d][rng() % grid[d]];
    }
    c.part = BlockPartition(dom, sizes);
  }
  auto one_side = [&] {
    std::vector<Index> w(ndim);
    for (int d = 0; d < ndim; ++d) {
      const Index L = dom.extent(d);
      const Index wmax = c.periodic[d] ? (ndim == 3 ? L + 2 : 2 * L + 2) : 4;
      w[d] = u(0, wmax);
    }
    return w;
  };
  std::ostringstream os;
  os << "domain " << dom.str() << " grid";
  for (int d = 0; d < ndim; ++d) os << " " << vec_str(c.part.sizes(d));
  os << " periodic";
  for (bool p : c.periodic) os << " " << p;
  if (u(0, 1) == 0) {
    const auto l = one_side(), r = one_side();
    c.widths = HaloWidths(l, r);
    os << " uniform widths " << vec_str(l) << "/" << vec_str(r);
  } else {
    std::vector<std::vector<Index>> l, r;
    os << " widths";
    for (int b = 0; b < c.part.num_blocks(); ++b) {
      l.push_back(one_side());
      r.push_back(one_side());
      os << " " << vec_str(l.back()) << "/" << vec_str(r.back());
    }
    c.widths = HaloWidths::per_block(l, r);
  }
  c.str = os.str();
  return c;
}

// Runs the exchange serially the way the runtime does: each sender packs its sends to a peer
// in plan order into one message, the peer unpacks its receives from that sender in plan
// order. Then checks every cell of every padded buffer against the oracle. Returns "" or the
// first failure.
std::string simulate_and_check(const Case& c, const HaloGeometry& geo) {
  const BlockPartition& part = c.part;
  const Box dom = part.domain();
  const int nb = part.num_blocks();
  std::vector<Box> block(nb), padded(nb);
  std::vector<std::vector<Index>> owned(nb), buf(nb);
  std::vector<std::vector<int>> writes(nb), open_cover(nb);
  for (int b = 0; b < nb; ++b) {
    block[b] = part.block(b);
    padded[b] = geo.padded_box(b);
    if (padded[b] != grow(block[b], c.widths.left(b), c.widths.right(b)))
      return "padded_box of block " + std::to_string(b) + " is " + padded[b].str();
    owned[b].resize(static_cast<std::size_t>(block[b].volume()));
    for_each_cell(block[b], [&](const std::vector<Index>& p) {
      owned[b][linear_index(block[b], p.data())] = linear_index(dom, p.data());
    });
    buf[b].assign(static_cast<std::size_t>(padded[b].volume()), kMarker);
    writes[b].assign(buf[b].size(), 0);
    open_cover[b].assign(buf[b].size(), 0);
    for_each_cell(block[b], [&](const std::vector<Index>& p) {
      buf[b][linear_index(padded[b], p.data())] = owned[b][linear_index(block[b], p.data())];
    });
  }

  Index sent_total = 0, received_total = 0;
  for (int p = 0; p < nb; ++p) {
    for (int q = 0; q < nb; ++q) {
      std::vector<Index> msg;
      for (const HaloSend& s : sends_to(geo.plan(p), q)) {
        if (!block[p].contains(s.src) || s.src.empty())
          return "send " + s.src.str() + " of block " + std::to_string(p) + " not in its block";
        for_each_cell(s.src, [&](const std::vector<Index>& x) {
          msg.push_back(owned[p][linear_index(block[p], x.data())]);
        });
      }
      std::size_t at = 0;
      for (const HaloRecv& r : recvs_from(geo.plan(q), p)) {
        if (!padded[q].contains(r.dst) || r.dst.empty())
          return "recv " + r.dst.str() + " of block " + std::to_string(q) + " not in its frame";
        bool overflow = false;
        for_each_cell(r.dst, [&](const std::vector<Index>& x) {
          if (at >= msg.size()) {
            overflow = true;
            return;
          }
          const Index i = linear_index(padded[q], x.data());
          buf[q][i] = msg[at++];
          ++writes[q][i];
        });
        if (overflow) return "message " + std::to_string(p) + "->" + std::to_string(q) + " short";
      }
      if (at != msg.size())
        return "message " + std::to_string(p) + "->" + std::to_string(q) + " has " +
               std::to_string(msg.size()) + " cells, receiver unpacks " + std::to_string(at);
      sent_total += static_cast<Index>(msg.size());
      received_total += static_cast<Index>(at);
    }
  }
  if (sent_total != received_total) return "cells sent != cells received in total";

  for (int q = 0; q < nb; ++q) {
    const HaloPlan& plan = geo.plan(q);
    for (const Box& o : plan.open) {
      if (!padded[q].contains(o) || o.empty())
        return "open box " + o.str() + " of block " + std::to_string(q) + " not in its frame";
      for_each_cell(o, [&](const std::vector<Index>& x) {
        ++open_cover[q][linear_index(padded[q], x.data())];
      });
    }
    std::string err;
    for_each_cell(padded[q], [&](const std::vector<Index>& x) {
      if (!err.empty()) return;
      const Index i = linear_index(padded[q], x.data());
      std::vector<Index> w = x;
      const bool interior = block[q].contains(x.data());
      const bool sourced = wrap(dom, c.periodic, w);
      const Index want = interior || sourced ? linear_index(dom, w.data()) : kMarker;
      const int want_writes = !interior && sourced ? 1 : 0;
      const int want_open = !interior && !sourced ? 1 : 0;
      if (buf[q][i] != want || writes[q][i] != want_writes || open_cover[q][i] != want_open)
        err = "block " + std::to_string(q) + " cell " + vec_str(x) + ": value " +
              std::to_string(buf[q][i]) + " (want " + std::to_string(want) + "), " +
              std::to_string(writes[q][i]) + " writes (want " + std::to_string(want_writes) +
              "), in " + std::to_string(open_cover[q][i]) + " open boxes (want " +
              std::to_string(want_open) + ")";
    });
    if (!err.empty()) return err;
  }
  return "";
}

// Structural properties of the plans: pairing, shapes, shifts, order, totals.
std::string check_plans(const Case& c, const HaloGeometry& geo) {
  const BlockPartition& part = c.part;
  const Box dom = part.domain();
  const int nb = part.num_blocks();
  for (int q = 0; q < nb; ++q) {
    const HaloPlan& plan = geo.plan(q);
    const std::string who = " (block " + std::to_string(q) + ")";
    if (!canonically_sorted(plan.recvs, [](const HaloRecv& r) { return r.dst; }))
      return "recvs not in canonical order" + who;
    if (!canonically_sorted(plan.sends, [](const HaloSend& s) { return shift(s.src, s.shift); }))
      return "sends not in canonical order" + who;
    Index recv = 0, sent = 0, open = 0;
    for (const auto& r : plan.recvs) recv += r.dst.volume();
    for (const auto& s : plan.sends) sent += s.src.volume();
    for (const auto& o : plan.open) open += o.volume();
    if (recv != plan.cells_received || sent != plan.cells_sent || open != plan.open_cells)
      return "plan totals disagree with its lists" + who;
    const Box g = geo.padded_box(q), b = part.block(q);
    if (plan.cells_received + plan.open_cells != g.volume() - b.volume())
      return "received + open != ghost volume" + who;
    for (const auto& r : plan.recvs)
      for (int d = 0; d < dom.ndim; ++d) {
        const Index L = dom.extent(d);
        const bool ok = c.periodic[d] ? (L > 0 && r.shift[d] % L == 0) : r.shift[d] == 0;
        if (!ok) return "shift " + vec_str(r.shift) + " not an image shift" + who;
      }
    for (int p = 0; p < nb; ++p) {
      const auto s = sends_to(geo.plan(p), q);
      const auto r = recvs_from(plan, p);
      const std::string pair = " (" + std::to_string(p) + "->" + std::to_string(q) + ")";
      if (s.size() != r.size()) return "send and recv counts differ" + pair;
      for (std::size_t i = 0; i < s.size(); ++i) {
        if (s[i].shift != r[i].shift) return "shifts differ at entry " + std::to_string(i) + pair;
        if (shift(s[i].src, s[i].shift) != r[i].dst || s[i].src.shape() != r[i].dst.shape())
          return "src " + s[i].src.str() + " + " + vec_str(s[i].shift) + " != dst " +
                 r[i].dst.str() + pair;
      }
    }
  }
  return "";
}

}  // namespace

TEST_CASE("Halo plans reproduce a serial exchange exactly (property)", "[halo]") {
  std::mt19937 rng(20251202);
  // Coverage counters: the random cases must actually reach the hard corners.
  int wider_than_neighbour = 0, wider_than_domain = 0, with_empty_blocks = 0, self_messages = 0;
  for (int trial = 0; trial < 600; ++trial) {
    const int ndim = 1 + trial % 3;
    const Case c = random_case(rng, ndim);
    INFO("trial " << trial << ": " << c.str);
    const HaloGeometry geo(c.part, c.widths, c.periodic);
    const std::string sim = simulate_and_check(c, geo);
    INFO(sim);
    REQUIRE(sim.empty());
    const std::string plans = check_plans(c, geo);
    INFO(plans);
    REQUIRE(plans.empty());

    bool thin = false, wide = false, empty = false, self = false;
    for (int b = 0; b < c.part.num_blocks(); ++b) {
      empty = empty || c.part.block(b).empty();
      for (const auto& s : geo.plan(b).sends) self = self || s.peer == b;
      for (int d = 0; d < ndim; ++d) {
        const Index w = std::max(c.widths.left(b)[d], c.widths.right(b)[d]);
        const auto sz = c.part.sizes(d);
        thin = thin || (c.part.grid()[d] > 1 && w > *std::min_element(sz.begin(), sz.end()) &&
                        !geo.plan(b).recvs.empty());
        wide = wide ||
               (c.periodic[d] && w > c.part.domain().extent(d) && c.part.domain().volume() > 0);
      }
    }
    wider_than_neighbour += thin;
    wider_than_domain += wide;
    with_empty_blocks += empty;
    self_messages += self;
  }
  CHECK(wider_than_neighbour > 100);
  CHECK(wider_than_domain > 100);
  CHECK(with_empty_blocks > 100);
  CHECK(self_messages > 100);
}

TEST_CASE("Two periodic blocks: both ghosts come from one peer, in matching order", "[halo]") {
  const BlockPartition part(Box({0}, {10}), std::vector<int>{2});  // [0,5) [5,10)
  const HaloGeometry geo(part, HaloWidths({1}, {1}), {true});
  const HaloPlan& p0 = geo.plan(0);
  REQUIRE(p0.recvs.size() == 2);
  CHECK(p0.recvs[0].peer == 1);
  CHECK(p0.recvs[0].dst == Box({-1}, {0}));
  CHECK(p0.recvs[0].shift == std::vector<Index>{-10});
  CHECK(p0.recvs[1].dst == Box({5}, {6}));
  CHECK(p0.recvs[1].shift == std::vector<Index>{0});
  const HaloPlan& p1 = geo.plan(1);
  REQUIRE(p1.sends.size() == 2);  // to block 0, in block 0's receive order
  CHECK(p1.sends[0].src == Box({9}, {10}));
  CHECK(p1.sends[0].shift == std::vector<Index>{-10});
  CHECK(p1.sends[1].src == Box({5}, {6}));
  CHECK(p1.sends[1].shift == std::vector<Index>{0});
  CHECK(p0.open.empty());
  CHECK(p0.cells_received == 2);
  CHECK(p1.cells_sent == 2);
}

TEST_CASE("One periodic block exchanges with itself, wrapping more than once", "[halo]") {
  const BlockPartition part(Box({0}, {3}), std::vector<int>{1});
  const HaloGeometry geo(part, HaloWidths({7}, {4}), {true});
  CHECK(geo.padded_box(0) == Box({-7}, {7}));
  const HaloPlan& p = geo.plan(0);
  // Images k = -3..2 except 0, the outer ones clipped to the padded box.
  const std::vector<Box> dst{Box({-7}, {-6}), Box({-6}, {-3}), Box({-3}, {0}), Box({3}, {6}),
                             Box({6}, {7})};
  const std::vector<Index> k{-3, -2, -1, 1, 2};
  REQUIRE(p.recvs.size() == dst.size());
  REQUIRE(p.sends.size() == dst.size());
  for (std::size_t i = 0; i < dst.size(); ++i) {
    CHECK(p.recvs[i].peer == 0);
    CHECK(p.recvs[i].dst == dst[i]);
    CHECK(p.recvs[i].shift == std::vector<Index>{3 * k[i]});
    CHECK(p.sends[i].peer == 0);
    CHECK(shift(p.sends[i].src, p.sends[i].shift) == dst[i]);
  }
  CHECK(p.cells_received == 11);
  CHECK(p.open.empty());
}

TEST_CASE("Ghosts wider than a thin or empty neighbour reach the blocks beyond", "[halo]") {
  // [0,3) [3,4) [4,4) [4,6), open boundaries.
  const BlockPartition part(Box({0}, {6}), std::vector<std::vector<Index>>{{3, 1, 0, 2}});
  const HaloGeometry geo(part, HaloWidths({2}, {2}), {false});
  const HaloPlan& p0 = geo.plan(0);
  REQUIRE(p0.recvs.size() == 2);
  CHECK((p0.recvs[0].peer == 1 && p0.recvs[0].dst == Box({3}, {4})));
  CHECK((p0.recvs[1].peer == 3 && p0.recvs[1].dst == Box({4}, {5})));
  REQUIRE(p0.open.size() == 1);
  CHECK(p0.open[0] == Box({-2}, {0}));
  // The empty block is no special case: its padded box [2,6) is filled like any other.
  const HaloPlan& p2 = geo.plan(2);
  REQUIRE(p2.recvs.size() == 3);
  CHECK((p2.recvs[0].peer == 0 && p2.recvs[0].dst == Box({2}, {3})));
  CHECK((p2.recvs[1].peer == 1 && p2.recvs[1].dst == Box({3}, {4})));
  CHECK((p2.recvs[2].peer == 3 && p2.recvs[2].dst == Box({4}, {6})));
  CHECK(p2.sends.empty());  // it owns nothing to send
  CHECK(geo.plan(3).open == std::vector<Box>{Box({6}, {8})});
}

TEST_CASE("Corners come in the same round, open cells are disjoint boxes", "[halo]") {
  // 2x2 blocks of [0,4)^2, periodic in dim 0 only, width 1 everywhere.
  const BlockPartition part(Box({0, 0}, {4, 4}), std::vector<int>{2, 2});
  const HaloGeometry geo(part, HaloWidths({1, 1}, {1, 1}), {true, false});
  const HaloPlan& p = geo.plan(0);  // block [0,2)x[0,2), padded [-1,3)x[-1,3)
  CHECK(p.open == std::vector<Box>{Box({-1, -1}, {3, 0})});
  CHECK(p.cells_received == 16 - 4 - 4);
  bool corner = false;  // (-1,2) wraps to (3,2), owned by block 3
  for (const auto& r : p.recvs) corner = corner || (r.peer == 3 && r.dst == Box({-1, 2}, {0, 3}));
  CHECK(corner);
}

TEST_CASE("Halo geometry rejects inputs that do not fit the partition", "[halo]") {
  const BlockPartition part(Box({0, 0}, {4, 6}), std::vector<int>{2, 3});
  auto make = [&](const HaloWidths& w, const std::vector<bool>& per) {
    HaloGeometry g(part, w, per);
  };
  auto message = [&](const HaloWidths& w, const std::vector<bool>& per) {
    try {
      make(w, per);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  using Catch::Matchers::Contains;
  CHECK_THAT(message(HaloWidths({1, 1}, {1, 1}), {true}), Contains("periodic flags"));
  CHECK_THAT(message(HaloWidths({1}, {1, 1}), {false, false}), Contains("left widths have 1 dims"));
  CHECK_THAT(message(HaloWidths({1, 1}, {1, 1, 1}), {false, false}),
             Contains("right widths have 3 dims"));
  CHECK_THAT(message(HaloWidths({1, -2}, {1, 1}), {false, false}),
             Contains("negative left width -2 in dim 1"));
  const std::vector<std::vector<Index>> six(6, {1, 1}), five(5, {1, 1});
  CHECK_THAT(message(HaloWidths::per_block(five, five), {false, false}),
             Contains("given for 5 blocks, the partition has 6"));
  CHECK_THAT(message(HaloWidths::per_block(six, five), {false, false}),
             Contains("left widths given for 6 blocks, right widths for 5"));
  auto neg = six;
  neg[4][0] = -1;
  CHECK_THAT(message(HaloWidths::per_block(six, neg), {false, false}),
             Contains("negative right width -1 in dim 0 of block 4"));
  CHECK_THAT(message(HaloWidths(), {false, false}), Contains("HaloWidths"));
  CHECK(message(HaloWidths::per_block(six, six), {false, true}) == "no error");

  const HaloGeometry geo(part, HaloWidths({1, 1}, {0, 2}), {false, false});
  CHECK_THROWS_WITH(geo.plan(6), Contains("HaloGeometry::plan: block 6 out of range"));
  CHECK_THROWS_WITH(geo.plan(-1), Contains("out of range"));
  CHECK_THROWS_WITH(geo.padded_box(7), Contains("HaloGeometry::padded_box: block 7"));
}

TEST_CASE("Plans and geometries are cached, also across threads", "[halo]") {
  const BlockPartition part(Box({0, 0, 0}, {5, 4, 3}), std::vector<int>{2, 2, 1});
  const HaloWidths w({1, 2, 0}, {2, 1, 3});
  const auto held = cached_halo_geometry(part, w, {true, false, true});
  const HaloGeometry& a = *held;
  CHECK(&a == cached_halo_geometry(part, w, {true, false, true}).get());
  CHECK(&a != cached_halo_geometry(part, w, {false, false, true}).get());
  CHECK(&a !=
        cached_halo_geometry(part, HaloWidths({1, 2, 0}, {2, 1, 2}), {true, false, true}).get());
  CHECK(&a.plan(1) == &a.plan(1));

  // Many threads asking at once get one geometry and one plan object per block.
  const BlockPartition part2(Box({0, 0}, {9, 7}), std::vector<int>{3, 2});
  std::vector<const HaloGeometry*> geos(8);
  std::vector<std::vector<const HaloPlan*>> plans(8);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      const auto held2 = cached_halo_geometry(part2, HaloWidths({2, 1}, {1, 3}), {true, true});
      const HaloGeometry& g = *held2;
      geos[t] = &g;
      plans[t].assign(6, nullptr);
      for (int i = 0; i < 6; ++i) {
        const int b = (i + t) % 6;  // threads start on different blocks
        plans[t][b] = &g.plan(b);
      }
    });
  for (auto& th : threads) th.join();
  for (int t = 1; t < 8; ++t) {
    CHECK(geos[t] == geos[0]);
    CHECK(plans[t] == plans[0]);
  }
  CHECK_THROWS_AS(cached_halo_geometry(part2, HaloWidths({1}, {1}), {true, true}), Error);
}

TEST_CASE("The geometry cache is bounded; held geometries outlive eviction", "[halo]") {
  const BlockPartition part(Box({0, 0}, {8, 8}), std::vector<int>{2, 2});
  const auto first = cached_halo_geometry(part, HaloWidths({1, 1}, {1, 1}), {false, false});
  const HaloGeometry* first_raw = first.get();
  // Recently used entries stay: asking for `first` again in between keeps it cached.
  for (Index k = 2; k < 2 + static_cast<Index>(kHaloGeometryCacheEntries) / 2; ++k)
    (void)cached_halo_geometry(part, HaloWidths({k, 1}, {1, 1}), {false, false});
  CHECK(cached_halo_geometry(part, HaloWidths({1, 1}, {1, 1}), {false, false}).get() == first_raw);
  // More distinct layouts than the cache holds: the least recently used leave it.
  const auto other = cached_halo_geometry(part, HaloWidths({1, 2}, {1, 1}), {false, false});
  const HaloGeometry* other_raw = other.get();
  for (Index k = 0; k < 2 * static_cast<Index>(kHaloGeometryCacheEntries); ++k)
    (void)cached_halo_geometry(part, HaloWidths({1, 1}, {k + 2, 1}), {false, false});
  const auto again = cached_halo_geometry(part, HaloWidths({1, 2}, {1, 1}), {false, false});
  CHECK(again.get() != other_raw);            // recomputed: it had been evicted
  CHECK(other->widths() == again->widths());  // the held one is still alive and equal
  CHECK(&other->plan(0) != nullptr);
}
