#include <catch2/catch.hpp>

#include "decomp/error.hpp"
#include "decomp/grid_factor.hpp"

using namespace tessera;

namespace {
// Brute force over every factorization: the minimum surface any grid achieves.
double best_surface(int n, const std::vector<Index>& shape) {
  double best = 1e300;
  std::vector<int> g(shape.size(), 1);
  auto rec = [&](auto&& self, std::size_t d, int left) -> void {
    if (d == shape.size()) {
      if (left == 1) {
        bool fits = true;
        for (std::size_t e = 0; e < shape.size(); ++e) fits = fits && g[e] <= shape[e];
        if (fits) best = std::min(best, block_surface(shape, g));
      }
      return;
    }
    for (int f = 1; f <= left; ++f)
      if (left % f == 0) g[d] = f, self(self, d + 1, left / f);
  };
  rec(rec, 0, n);
  return best;
}
}  // namespace

TEST_CASE("min_surface_grid factors the rank count and minimizes surface", "[grid]") {
  const std::vector<std::vector<Index>> shapes = {{64, 64},      {256, 32},    {128, 128, 128},
                                                  {512, 64, 64}, {30, 20, 10}, {1000}};
  for (const auto& s : shapes) {
    for (int n : {1, 2, 3, 4, 6, 7, 8, 12, 16}) {
      const auto g = min_surface_grid(n, s);
      REQUIRE(g.size() == s.size());
      int prod = 1;
      for (int x : g) prod *= x;
      REQUIRE(prod == n);
      REQUIRE(block_surface(s, g) == Approx(best_surface(n, s)));
    }
  }
  CHECK(min_surface_grid(4, {64, 64}) == std::vector<int>{2, 2});
  CHECK(min_surface_grid(2, {64, 64, 64}) == std::vector<int>{2, 1, 1});  // tie: outer dim
  CHECK(min_surface_grid(4, {1024, 16}) == std::vector<int>{4, 1});
  CHECK(min_surface_grid(4, {64, 64}, {false, true}) == std::vector<int>{1, 4});
  CHECK_THROWS_AS(min_surface_grid(0, {4}), Error);
  CHECK_THROWS_AS(min_surface_grid(2, {4, 4}, {false, false}), Error);
}

TEST_CASE("min_halo_traffic_grid keeps the unit-stride dim whole when that moves fewer lines",
          "[grid]") {
  // 256^3 over 8: 2x2x2 touches 2 * 128 * 8 + 128 * 128 lines, 4x2x1 2 * 128 * 16 + 64 * 16.
  CHECK(block_halo_lines({256, 256, 256}, {2, 2, 2}) == Approx(2 * 128 * 8 + 128 * 128));
  CHECK(block_halo_lines({256, 256, 256}, {4, 2, 1}) == Approx(2 * 128 * 16 + 64 * 16));
  CHECK(min_halo_traffic_grid(8, {256, 256, 256}) == std::vector<int>{4, 2, 1});
  CHECK(min_halo_traffic_grid(4, {64, 64}) == std::vector<int>{4, 1});
  // The last dim is split only when nothing else can be: too few cells, or not allowed.
  CHECK(min_halo_traffic_grid(4, {2, 64}) == std::vector<int>{2, 2});
  CHECK(min_halo_traffic_grid(4, {64, 64}, {false, true}) == std::vector<int>{1, 4});
  CHECK(min_halo_traffic_grid(1, {5, 5, 5}) == std::vector<int>{1, 1, 1});
  // Brute force: no factorization without empty blocks touches fewer lines.
  for (const std::vector<Index>& s : std::vector<std::vector<Index>>{
           {128, 128, 128}, {512, 64, 64}, {30, 20, 10}, {64, 1024}, {1000}}) {
    for (int n : {2, 3, 4, 6, 8, 12, 16}) {
      const auto g = min_halo_traffic_grid(n, s);
      int prod = 1;
      for (int x : g) prod *= x;
      REQUIRE(prod == n);
      std::vector<int> c(s.size(), 1);
      auto rec = [&](auto&& self, std::size_t d, int left) -> void {
        if (d == s.size()) {
          bool fits = left == 1;
          for (std::size_t e = 0; fits && e < s.size(); ++e) fits = c[e] <= s[e];
          if (fits) REQUIRE(block_halo_lines(s, g) <= block_halo_lines(s, c));
          return;
        }
        for (int f = 1; f <= left; ++f)
          if (left % f == 0) c[d] = f, self(self, d + 1, left / f);
      };
      rec(rec, 0, n);
    }
  }
  CHECK_THROWS_AS(min_halo_traffic_grid(0, {4}), Error);
}
