// Point partitions: RCB and space-filling curves on uniform, strongly clustered and
// degenerate clouds (duplicates, a plane, fewer points than parts) at 1 to 8 parts: every
// point owned once and inside its part's region, imbalance <= 1.05 (weighted too); the
// ghost plan equal to a brute-force "within r of the region" and complete for neighbour
// queries (every pair closer than r is covered); the Hilbert curve steps to a face neighbour.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <set>

#include "decomp/point_partition.hpp"

using namespace tessera;

namespace {

std::vector<Point3> uniform(std::size_t n, unsigned seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<Point3> p(n);
  for (auto& x : p) x = {u(g), u(g), u(g)};
  return p;
}

// Three blobs of very different size and density plus a sparse background.
std::vector<Point3> clustered(std::size_t n, unsigned seed) {
  std::mt19937 g(seed);
  std::normal_distribution<double> z(0, 1);
  std::uniform_real_distribution<double> u(0, 10);
  std::vector<Point3> p;
  const Point3 c[3] = {{1, 1, 1}, {8, 2, 5}, {5, 9, 9}};
  const double s[3] = {0.01, 0.3, 1.0};
  for (std::size_t i = 0; i < n; ++i) {
    const int k = i % 10 == 0 ? 3 : static_cast<int>(i % 3);
    if (k == 3)
      p.push_back({u(g), u(g), u(g)});
    else
      p.push_back({c[k][0] + s[k] * z(g), c[k][1] + s[k] * z(g), c[k][2] + s[k] * z(g)});
  }
  return p;
}

std::vector<Point3> degenerate(int which) {
  std::vector<Point3> p;
  if (which == 0)  // every point the same
    p.assign(500, Point3{0.5, 0.5, 0.5});
  else if (which == 1)  // a plane z = 2
    for (int i = 0; i < 30; ++i)
      for (int j = 0; j < 30; ++j) p.push_back({i * 0.1, j * 0.1, 2.0});
  else  // fewer points than parts
    p = {{0, 0, 0}, {1, 0, 0}, {0, 1, 0}};
  return p;
}

void check_partition(const PointPartition& part, const std::vector<Point3>& pts, int parts,
                     double max_imbalance) {
  REQUIRE(part.owner.size() == pts.size());
  for (std::size_t i = 0; i < pts.size(); ++i) {
    const int o = part.owner[i];
    REQUIRE(o >= 0);
    REQUIRE(o < parts);
    double d = INFINITY;
    for (const Region3& b : part.region[static_cast<std::size_t>(o)])
      d = std::min(d, b.distance_to(pts[i]));
    CHECK(d == 0.0);
  }
  if (max_imbalance > 0) CHECK(part.imbalance() <= max_imbalance);
}

}  // namespace

TEST_CASE("RCB and SFC partitions: ownership, regions, balance") {
  for (int parts = 1; parts <= 8; ++parts) {
    INFO(parts << " parts");
    for (const auto& pts : {uniform(20000, 1), clustered(20000, 2)}) {
      check_partition(rcb_partition(pts, {}, parts), pts, parts, 1.05);
      check_partition(sfc_partition(pts, {}, parts, Curve::Hilbert), pts, parts, 1.05);
      check_partition(sfc_partition(pts, {}, parts, Curve::Morton), pts, parts, 1.05);
    }
    // Weighted: the weight, not the count, is balanced.
    const auto pts = clustered(20000, 3);
    std::vector<double> w(pts.size());
    std::mt19937 g(4);
    std::uniform_real_distribution<double> u(0.1, 3.0);
    for (auto& x : w) x = u(g);
    check_partition(rcb_partition(pts, w, parts), pts, parts, 1.05);
    check_partition(sfc_partition(pts, w, parts), pts, parts, 1.05);
    for (int which = 0; which < 3; ++which) {  // degenerate clouds: owned and inside, no crash
      const auto d = degenerate(which);
      check_partition(rcb_partition(d, {}, parts), d, parts, which == 2 ? 0 : 1.05);
      check_partition(sfc_partition(d, {}, parts), d, parts, 0);
    }
  }
}

TEST_CASE("the ghost plan is the points within r of other regions, and covers every close pair") {
  const auto pts = clustered(3000, 5);
  for (int parts : {2, 3, 5, 8})
    for (double r : {0.05, 0.5, 4.0})  // the last spans several regions
      for (bool rcb : {true, false}) {
        const PointPartition part =
            rcb ? rcb_partition(pts, {}, parts) : sfc_partition(pts, {}, parts);
        INFO(parts << " parts, r " << r << (rcb ? " RCB" : " SFC"));
        std::set<std::pair<Index, int>> all;
        for (int me = 0; me < parts; ++me) {
          const auto plan = ghost_plan(part, pts, me, r);
          std::set<std::pair<Index, int>> got(plan.begin(), plan.end());
          CHECK(got.size() == plan.size());
          // Brute force: every point of me against every box of every other part.
          std::set<std::pair<Index, int>> want;
          for (std::size_t i = 0; i < pts.size(); ++i) {
            if (part.owner[i] != me) continue;
            for (int q = 0; q < parts; ++q) {
              if (q == me) continue;
              for (const Region3& b : part.region[static_cast<std::size_t>(q)]) {
                double s = 0;
                for (int d = 0; d < 3; ++d) {
                  const double e = std::max({b.lo[d] - pts[i][d], 0.0, pts[i][d] - b.hi[d]});
                  s += e * e;
                }
                if (s <= r * r) want.insert({static_cast<Index>(i), q});
              }
            }
          }
          CHECK(got == want);
          all.insert(got.begin(), got.end());
        }
        // Completeness: a point within r of another part's point is that part's ghost.
        for (std::size_t i = 0; i < pts.size(); i += 7)
          for (std::size_t j = 0; j < pts.size(); ++j) {
            const int a = part.owner[i], b = part.owner[j];
            if (a == b) continue;
            double s = 0;
            for (int d = 0; d < 3; ++d) s += (pts[i][d] - pts[j][d]) * (pts[i][d] - pts[j][d]);
            if (s <= r * r) CHECK(all.count({static_cast<Index>(j), a}) == 1);
          }
      }
}

TEST_CASE("Hilbert order walks a grid from face neighbour to face neighbour; Morton is Z order") {
  const int n = 8;
  std::vector<std::pair<std::uint64_t, Point3>> cells;
  const Point3 lo{0, 0, 0}, hi{n - 1.0, n - 1.0, n - 1.0};
  for (int x = 0; x < n; ++x)
    for (int y = 0; y < n; ++y)
      for (int z = 0; z < n; ++z) {
        const Point3 p{double(x), double(y), double(z)};
        cells.push_back({curve_key(p, lo, hi, Curve::Hilbert), p});
      }
  std::sort(cells.begin(), cells.end());
  std::set<std::uint64_t> distinct;
  for (const auto& c : cells) distinct.insert(c.first);
  CHECK(distinct.size() == cells.size());
  for (std::size_t i = 1; i < cells.size(); ++i) {
    double manhattan = 0;
    for (int d = 0; d < 3; ++d) manhattan += std::abs(cells[i].second[d] - cells[i - 1].second[d]);
    CHECK(manhattan == Approx(1.0));
  }
  CHECK(curve_key({0, 0, 0}, lo, hi, Curve::Morton) == 0);
  // Morton interleaves x, y, z from the most significant bit: the far corner along x alone
  // outranks y alone, which outranks z alone.
  const Point3 o{0, 0, 0}, one{1, 1, 1};
  CHECK(curve_key({0, 0, 1}, o, one, Curve::Morton) == 0x1249249249249249ULL);
  CHECK(curve_key({0, 1, 0}, o, one, Curve::Morton) == 0x1249249249249249ULL << 1);
  CHECK(curve_key({1, 0, 0}, o, one, Curve::Morton) == 0x1249249249249249ULL << 2);
}
