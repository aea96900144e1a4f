#include <catch2/catch.hpp>

#include "decomp/box.hpp"
#include "decomp/error.hpp"
#include "tests/decomp/random_boxes.hpp"

using namespace tessera;

namespace {
// Brute force: is point p in box b, by definition.
bool in(const Box& b, const std::vector<Index>& p) {
  for (int d = 0; d < b.ndim; ++d)
    if (p[d] < b.lo[d] || p[d] >= b.hi[d]) return false;
  return true;
}
// Calls fn on every point of [-8, 12)^ndim.
template <class Fn>
void for_all_points(int ndim, Fn fn) {
  std::vector<Index> p(ndim, -8);
  while (true) {
    fn(p);
    int d = ndim - 1;
    while (d >= 0 && ++p[d] == 12) p[d--] = -8;
    if (d < 0) break;
  }
}
}  // namespace

TEST_CASE("Box basics", "[box]") {
  Box b({0, 2}, {4, 8});
  CHECK(b.volume() == 24);
  CHECK(b.shape() == std::vector<Index>{4, 6});
  CHECK(b.str() == "[0,4)x[2,8)");
  CHECK(Box({3}, {3}).empty());
  CHECK(Box({3}, {1}).volume() == 0);
  CHECK(Box({0, 0}, {0, 5}) == Box({7, 7}, {7, 9}));  // all empty boxes of a rank are equal
  CHECK_THROWS_AS(Box({0}, {1, 2}), Error);
  CHECK_THROWS_AS(intersect(Box({0}, {1}), Box({0, 0}, {1, 1})), Error);
}

TEST_CASE("Box intersection is set intersection (property)", "[box]") {
  std::mt19937 rng(1);
  for (int ndim = 1; ndim <= 3; ++ndim) {
    for (int trial = 0; trial < 60; ++trial) {
      const Box a = test::random_box(rng, ndim), b = test::random_box(rng, ndim);
      const Box c = intersect(a, b);
      Index count = 0;
      bool ok = true;
      for_all_points(ndim, [&](const std::vector<Index>& p) {
        const bool both = in(a, p) && in(b, p);
        ok = ok && (both == in(c, p));
        count += both;
      });
      REQUIRE(ok);
      REQUIRE(c.volume() == count);
      REQUIRE(intersect(b, a) == c);  // commutative
      REQUIRE(a.contains(c));
      REQUIRE(b.contains(c));
      REQUIRE(intersect(c, a) == c);  // idempotent
    }
  }
}

TEST_CASE("Box shift, grow, clip (property)", "[box]") {
  std::mt19937 rng(2);
  std::uniform_int_distribution<Index> u(-3, 3);
  for (int trial = 0; trial < 200; ++trial) {
    const int ndim = 1 + trial % 3;
    const Box a = test::random_box(rng, ndim);
    std::vector<Index> by(ndim), lw(ndim), hw(ndim);
    for (int d = 0; d < ndim; ++d) by[d] = u(rng), lw[d] = u(rng) + 3, hw[d] = u(rng) + 3;
    const Box s = shift(a, by);
    REQUIRE(s.volume() == a.volume());
    for (int d = 0; d < ndim; ++d) REQUIRE(s.lo[d] == a.lo[d] + by[d]);
    REQUIRE(shift(s, [&] {
              auto n = by;
              for (auto& x : n) x = -x;
              return n;
            }()) == a);
    const Box g = grow(a, lw, hw);
    if (!a.empty()) {
      REQUIRE(g.contains(a));
      Index v = 1;
      for (int d = 0; d < ndim; ++d) v *= a.extent(d) + lw[d] + hw[d];
      REQUIRE(g.volume() == v);
      REQUIRE(grow(
                  g,
                  [&] {
                    auto n = lw;
                    for (auto& x : n) x = -x;
                    return n;
                  }(),
                  [&] {
                    auto n = hw;
                    for (auto& x : n) x = -x;
                    return n;
                  }()) == a);
    }
    const Box dom = test::random_box(rng, ndim);
    const Box c = clip(g, dom);
    REQUIRE(dom.contains(c));
    REQUIRE(g.contains(c));
  }
}

TEST_CASE("Box linear index round-trips and is row-major", "[box]") {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 50; ++trial) {
    const int ndim = 1 + trial % 4;
    Box b = test::random_box(rng, ndim, -4, 5);
    if (b.empty()) continue;
    Index expect = 0;
    bool ok = true;
    std::vector<Index> p(ndim), q(ndim);
    for (Index i = 0; i < b.volume(); ++i) {
      delinearize(b, i, p.data());
      ok = ok && b.contains(p.data()) && linear_index(b, p.data()) == expect++;
      if (i > 0) ok = ok && q < p;  // strictly increasing lexicographically
      q = p;
    }
    REQUIRE(ok);
  }
}

TEST_CASE("outside_of tiles outer minus inner exactly, disjointly (property)", "[box]") {
  std::mt19937 rng(7);
  for (int ndim = 1; ndim <= 3; ++ndim) {
    for (int trial = 0; trial < 60; ++trial) {
      const Box outer = test::random_box(rng, ndim);
      // inner: a random box clipped into outer (possibly empty or equal to outer)
      const Box inner = intersect(test::random_box(rng, ndim), outer);
      const std::vector<Box> slabs = outside_of(outer, inner);
      bool ok = true;
      for_all_points(ndim, [&](const std::vector<Index>& p) {
        int covered = 0;
        for (const Box& s : slabs) covered += in(s, p);
        const bool want = in(outer, p) && !in(inner, p);
        ok = ok && covered == (want ? 1 : 0);
      });
      INFO(outer.str() << " minus " << inner.str());
      REQUIRE(ok);
      REQUIRE(static_cast<int>(slabs.size()) <= 2 * ndim);
    }
  }
}

TEST_CASE("relative_to is the shift by -frame.lo", "[box]") {
  const Box frame({-2, 3}, {6, 9}), b({0, 4}, {3, 8});
  CHECK(relative_to(b, frame) == Box({2, 1}, {5, 5}));
  CHECK(relative_to(frame, frame) == Box::from_shape(frame.shape()));
  CHECK_THROWS_AS(relative_to(Box({0}, {1}), frame), Error);
}
