#include <catch2/catch.hpp>

#include "decomp/error.hpp"
#include "decomp/partition.hpp"
#include "tests/decomp/random_boxes.hpp"

using namespace tessera;

TEST_CASE("balanced_sizes", "[partition]") {
  CHECK(balanced_sizes(10, 3) == std::vector<Index>{4, 3, 3});
  CHECK(balanced_sizes(2, 4) == std::vector<Index>{1, 1, 0, 0});
  CHECK(balanced_sizes(0, 2) == std::vector<Index>{0, 0});
  CHECK_THROWS_AS(balanced_sizes(4, 0), Error);
}

TEST_CASE("A partition covers its domain exactly once (property)", "[partition]") {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> g(1, 5);
  for (int trial = 0; trial < 150; ++trial) {
    const int ndim = 1 + trial % 3;
    Box dom = test::random_box(rng, ndim, -3, 9);
    std::vector<int> grid(ndim);
    for (auto& x : grid) x = g(rng);
    BlockPartition part;
    if (trial % 2 == 0) {
      part = BlockPartition(dom, grid);
    } else {
      // Random uneven explicit sizes, zeros included.
      std::vector<std::vector<Index>> sizes(ndim);
      for (int d = 0; d < ndim; ++d) {
        sizes[d].assign(grid[d], 0);
        for (Index c = 0; c < dom.extent(d); ++c) ++sizes[d][rng() % grid[d]];
      }
      part = BlockPartition(dom, sizes);
    }
    REQUIRE(part.num_blocks() == [&] {
      int n = 1;
      for (int x : grid) n *= x;
      return n;
    }());
    // Every domain cell is in exactly one block, and owner() names that block.
    std::vector<int> hits(static_cast<std::size_t>(dom.volume()), 0);
    bool owner_ok = true;
    Index total = 0;
    for (int id = 0; id < part.num_blocks(); ++id) {
      const Box b = part.block(id);
      REQUIRE(part.id_of(part.coords_of(id)) == id);
      REQUIRE(dom.contains(b));
      total += b.volume();
      std::vector<Index> p(ndim);
      for (Index i = 0; i < b.volume(); ++i) {
        delinearize(b, i, p.data());
        ++hits[static_cast<std::size_t>(linear_index(dom, p.data()))];
        owner_ok = owner_ok && part.owner(p.data()) == id;
      }
    }
    REQUIRE(total == dom.volume());
    REQUIRE(owner_ok);
    bool once = true;
    for (int h : hits) once = once && h == 1;
    REQUIRE(once);
    // Disjointness, pairwise.
    for (int i = 0; i < part.num_blocks(); ++i)
      for (int j = i + 1; j < part.num_blocks(); ++j)
        REQUIRE(intersect(part.block(i), part.block(j)).empty());
  }
}

TEST_CASE("blocks_overlapping finds exactly the intersecting blocks", "[partition]") {
  std::mt19937 rng(12);
  for (int trial = 0; trial < 100; ++trial) {
    std::vector<std::vector<Index>> sizes(1, std::vector<Index>(1 + rng() % 6, 0));
    const Index n = rng() % 20;
    for (Index c = 0; c < n; ++c) ++sizes[0][rng() % sizes[0].size()];
    BlockPartition part(Box({0}, {n}), sizes);
    const Index lo = static_cast<Index>(rng() % (n + 1)),
                hi = lo + static_cast<Index>(rng() % 5) + 1;
    int first = 0, last = 0;
    part.blocks_overlapping(0, lo, std::min(hi, n), first, last);
    for (int i = 0; i < part.grid()[0]; ++i) {
      const bool hit =
          !intersect(part.block(std::vector<int>{i}), Box({lo}, {std::min(hi, n)})).empty();
      if (hit) REQUIRE((i >= first && i <= last));
    }
  }
}

TEST_CASE("Partition errors say what is wrong", "[partition]") {
  const Box dom({0, 0}, {4, 4});
  CHECK_THROWS_WITH(BlockPartition(dom, std::vector<std::vector<Index>>{{2, 2}, {1, 1}}),
                    Catch::Contains("sum to 2"));
  CHECK_THROWS_AS(BlockPartition(dom, std::vector<int>{2}), Error);
  BlockPartition p(dom, std::vector<int>{2, 2});
  const Index outside[2] = {4, 0};
  CHECK_THROWS_WITH(p.owner(outside), Catch::Contains("outside the domain"));
  CHECK_THROWS_AS(p.block(std::vector<int>{2, 0}), Error);
}
