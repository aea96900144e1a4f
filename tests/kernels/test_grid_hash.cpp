// The grid hash's exact kNN and ball queries against a brute-force search and the k-d tree
// (identical lists: rows in (squared distance, global id) order) on uniform, clustered and
// degenerate clouds (duplicates, a plane, a line, one point repeated, fewer points than k,
// no points), queries inside and far outside the points, several cell sizes.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

#include "kernels/grid_hash.hpp"
#include "kernels/neighbors.hpp"

using namespace tessera;
using namespace tessera::kernels;

namespace {

struct Cloud {
  std::vector<double> xyz;
  std::vector<std::int64_t> ids;
  Index n() const { return static_cast<Index>(ids.size()); }
};

// Shuffled global ids, so ties break by id, not by row.
Cloud with_ids(std::vector<double> xyz, std::mt19937& rng) {
  Cloud c;
  c.xyz = std::move(xyz);
  c.ids.resize(c.xyz.size() / 3);
  std::iota(c.ids.begin(), c.ids.end(), 100);
  std::shuffle(c.ids.begin(), c.ids.end(), rng);
  return c;
}

std::vector<Cloud> clouds() {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(-1, 1);
  std::normal_distribution<double> g(0, 0.02);
  std::vector<Cloud> out;
  std::vector<double> p;
  for (int i = 0; i < 1500; ++i) p.insert(p.end(), {u(rng), u(rng), 0.5 * u(rng)});
  out.push_back(with_ids(p, rng));  // uniform
  p.clear();
  for (int i = 0; i < 1500; ++i) {
    const double cx = (i % 3) * 0.7, cy = (i % 5) * 0.1;
    p.insert(p.end(), {cx + g(rng), cy + g(rng), g(rng)});
  }
  for (int i = 0; i < 20; ++i) p.insert(p.end(), {5 * u(rng), 5 * u(rng), 5 * u(rng)});
  out.push_back(with_ids(p, rng));  // clustered with outliers
  p.clear();
  for (int i = 0; i < 400; ++i) {  // duplicates on a coarse lattice: many exact ties
    const double x = static_cast<double>(rng() % 4) * 0.25,
                 y = static_cast<double>(rng() % 3) * 0.5;
    p.insert(p.end(), {x, y, 1.0});
  }
  out.push_back(with_ids(p, rng));
  p.clear();
  for (int i = 0; i < 600; ++i) p.insert(p.end(), {u(rng), u(rng), 0.0});  // a plane
  out.push_back(with_ids(p, rng));
  p.clear();
  for (int i = 0; i < 300; ++i) p.insert(p.end(), {u(rng), 2.0, -1.0});  // a line
  out.push_back(with_ids(p, rng));
  p.clear();
  for (int i = 0; i < 50; ++i) p.insert(p.end(), {0.3, 0.3, 0.3});  // one point, 50 times
  out.push_back(with_ids(p, rng));
  for (int i = 0; i < 800; ++i)  // far from the origin: rounding of the binning is larger
    p.insert(p.end(), {1e5 + u(rng), -3e5 + u(rng), 1e5 + static_cast<double>(rng() % 9) * 0.125});
  out.push_back(with_ids(p, rng));
  p.clear();
  p = {0, 0, 0, 1, 0, 0, 0, 2, 0};  // fewer points than k
  out.push_back(with_ids(p, rng));
  out.push_back(Cloud{});  // none
  return out;
}

std::vector<double> queries(const Cloud& c) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> u(-1.5, 1.5);
  std::vector<double> q;
  for (Index i = 0; i < std::min<Index>(c.n(), 150); ++i)
    q.insert(q.end(), c.xyz.begin() + 3 * i, c.xyz.begin() + 3 * i + 3);
  for (int i = 0; i < 100; ++i) q.insert(q.end(), {u(rng), u(rng), u(rng)});
  q.insert(q.end(), {40, -30, 12, -1e3, 0, 0});  // far outside
  return q;
}

// All rows in (d2, id) order from query p.
std::vector<std::pair<double, Index>> brute(const Cloud& c, const double* p) {
  std::vector<std::pair<double, Index>> all;
  for (Index i = 0; i < c.n(); ++i) {
    const double* x = c.xyz.data() + 3 * i;
    const double dx = x[0] - p[0], dy = x[1] - p[1], dz = x[2] - p[2];
    all.emplace_back(dx * dx + dy * dy + dz * dz, i);
  }
  std::sort(all.begin(), all.end(), [&](const auto& a, const auto& b) {
    return a.first < b.first || (a.first == b.first && c.ids[a.second] < c.ids[b.second]);
  });
  return all;
}

}  // namespace

TEST_CASE("Grid hash kNN == brute force == k-d tree", "[kernels][grid_hash]") {
  int cloud_no = 0;
  for (const Cloud& c : clouds()) {
    const std::vector<double> q = queries(c);
    const Index nq = static_cast<Index>(q.size() / 3);
    const PointIndex tree(c.xyz.data(), c.ids.data(), c.n());
    for (double per_cell : {0.5, 4.0, 64.0}) {
      const GridHash grid(c.xyz.data(), c.ids.data(), c.n(), MemSpace::Host, per_cell);
      for (Index k : {1, 5, 16}) {
        std::vector<Index> idx(static_cast<std::size_t>(nq * k)),
            count(static_cast<std::size_t>(nq));
        std::vector<double> d2(idx.size());
        grid_knn(Device::host(), grid.view(), q.data(), nq, k, idx.data(), d2.data(), count.data());
        bool same = true;
        for (Index i = 0; i < nq && same; ++i) {
          const auto want = brute(c, q.data() + 3 * i);
          const Index m = std::min<Index>(k, c.n());
          same = count[static_cast<std::size_t>(i)] == m;
          const auto t = tree.knn(q.data() + 3 * i, k);
          same = same && static_cast<Index>(t.size()) == m;
          for (Index j = 0; j < m && same; ++j) {
            const auto s = static_cast<std::size_t>(i * k + j);
            same = idx[s] == want[static_cast<std::size_t>(j)].second &&
                   d2[s] == want[static_cast<std::size_t>(j)].first &&
                   t[static_cast<std::size_t>(j)].index == idx[s];
          }
        }
        INFO("cloud " << cloud_no << ", " << per_cell << " per cell, k = " << k);
        CHECK(same);
      }
    }
    ++cloud_no;
  }
}

TEST_CASE("Grid hash ball query == brute force == k-d tree", "[kernels][grid_hash]") {
  int cloud_no = 0;
  for (const Cloud& c : clouds()) {
    const std::vector<double> q = queries(c);
    const Index nq = static_cast<Index>(q.size() / 3);
    const PointIndex tree(c.xyz.data(), c.ids.data(), c.n());
    const GridHash grid(c.xyz.data(), c.ids.data(), c.n(), MemSpace::Host);
    // r2 = 0.0625 equals lattice distances of the duplicate cloud exactly (ties on the rim).
    for (double r2 : {0.0, 0.0625, 0.01, 0.3, std::numeric_limits<double>::infinity()}) {
      std::vector<Index> total(static_cast<std::size_t>(nq));
      grid_count_within(Device::host(), grid.view(), q.data(), nq, r2, total.data());
      for (Index cap : {Index{3}, Index{32}, std::max<Index>(1, c.n())}) {
        std::vector<Index> idx(static_cast<std::size_t>(nq * cap)),
            count(static_cast<std::size_t>(nq));
        std::vector<double> d2(idx.size());
        grid_within(Device::host(), grid.view(), q.data(), nq, r2, cap, idx.data(), d2.data(),
                    count.data());
        bool same = true;
        for (Index i = 0; i < nq && same; ++i) {
          auto want = brute(c, q.data() + 3 * i);
          want.erase(std::remove_if(want.begin(), want.end(),
                                    [&](const auto& w) { return !(w.first <= r2); }),
                     want.end());
          same = total[static_cast<std::size_t>(i)] == static_cast<Index>(want.size());
          const Index m = std::min<Index>(cap, static_cast<Index>(want.size()));
          same = same && count[static_cast<std::size_t>(i)] == m;
          const auto t = tree.within(q.data() + 3 * i, r2, cap);
          same = same && static_cast<Index>(t.size()) == m;
          for (Index j = 0; j < m && same; ++j) {
            const auto s = static_cast<std::size_t>(i * cap + j);
            same = idx[s] == want[static_cast<std::size_t>(j)].second &&
                   t[static_cast<std::size_t>(j)].index == idx[s];
          }
        }
        INFO("cloud " << cloud_no << ", r2 = " << r2 << ", cap " << cap);
        CHECK(same);
      }
    }
    ++cloud_no;
  }
}

TEST_CASE("Grid hash one query at a time == k-d tree", "[kernels][grid_hash]") {
  for (const Cloud& c : clouds()) {
    const std::vector<double> q = queries(c);
    const PointIndex tree(c.xyz.data(), c.ids.data(), c.n());
    const GridHash grid(c.xyz.data(), c.ids.data(), c.n(), MemSpace::Host);
    bool same = true;
    auto equal = [](const std::vector<Neighbor>& a, const std::vector<Neighbor>& b) {
      if (a.size() != b.size()) return false;
      for (std::size_t j = 0; j < a.size(); ++j)
        if (a[j].d2 != b[j].d2 || a[j].id != b[j].id || a[j].index != b[j].index) return false;
      return true;
    };
    for (std::size_t i = 0; i < q.size() / 3 && same; ++i) {
      const double* p = q.data() + 3 * i;
      same = equal(grid.knn(p, 7), tree.knn(p, 7)) && equal(grid.knn(p, 0), tree.knn(p, 0)) &&
             equal(grid.within(p, 0.05), tree.within(p, 0.05)) &&
             equal(grid.within(p, 0.05, 5), tree.within(p, 0.05, 5));
    }
    CHECK(same);
  }
}

TEST_CASE("Grid hash refuses what it cannot index", "[kernels][grid_hash]") {
  const std::vector<double> bad = {0, 0, NAN};
  const std::vector<std::int64_t> ids = {1};
  CHECK_THROWS_WITH(GridHash(bad.data(), ids.data(), 1, MemSpace::Host),
                    Catch::Contains("non-finite"));
  const std::vector<double> ok = {0, 0, 0};
  const GridHash g(ok.data(), ids.data(), 1, MemSpace::Host);
  Index idx = 0, count = 0;
  double d2 = 0;
  CHECK_THROWS_WITH(grid_within(Device::host(), g.view(), ok.data(), 1, 1.0, 0, &idx, &d2, &count),
                    Catch::Contains("max_points"));
}
