// The distributed FFT's stage plan (pure): which dims are transformed where, which axes move,
// kept extents of pruned dims, and the refusals.
#include <catch2/catch.hpp>

#include "decomp/error.hpp"
#include "decomp/fft_stages.hpp"

using namespace tessera;

namespace {
FftLayout layout(std::vector<Index> shape, std::vector<int> axis, std::vector<int> sizes,
                 std::vector<Index> modes = {}) {
  FftLayout l;
  l.shape = std::move(shape);
  l.axis = std::move(axis);
  l.axis_size = std::move(sizes);
  for (int d = 2; d < static_cast<int>(l.shape.size()); ++d) l.dims.push_back(d);
  l.modes = std::move(modes);
  return l;
}
int moves(const std::vector<FftStage>& s) {
  int m = 0;
  for (const auto& st : s) m += st.kind == FftStage::Kind::Move;
  return m;
}
}  // namespace

TEST_CASE("kept extents: real dims keep the lowest bins, complex dims both corners") {
  CHECK(kept_extent(16, 0, true) == 9);
  CHECK(kept_extent(16, 4, true) == 4);
  CHECK(kept_extent(16, 20, true) == 9);
  CHECK(kept_extent(16, 4, false) == 8);
  CHECK(kept_extent(16, 8, false) == 16);
  CHECK(kept_extent(7, 0, false) == 7);
}

TEST_CASE("slab: the real dim first, one transpose onto a transformed dim, pruned first") {
  const FftLayout l = layout({1, 2, 16, 16, 16}, {-1, -1, 0, -1, -1}, {4}, {4, 4, 4});
  const auto s = plan_fft_stages(l);
  REQUIRE(s.size() == 4);
  CHECK(s[0].kind == FftStage::Kind::Transform);
  CHECK(s[0].real);
  CHECK(s[0].dim == 4);
  CHECK(s[0].kept == 4);
  CHECK(s[1].dim == 3);  // the whole dim next
  CHECK(s[1].kept == 8);
  CHECK(s[2].kind == FftStage::Kind::Move);
  CHECK(s[2].dim == 2);
  CHECK(s[2].to == 3);  // the larger transformed dim takes the axis
  CHECK(s[3].dim == 2);
  CHECK(s.back().placement == std::vector<int>{-1, -1, -1, 0, -1});
  CHECK(s.back().shape == std::vector<Index>{1, 2, 8, 8, 4});
  // Only the kept modes travel: 8 x 8 x 4 of 16 x 16 x 9 complex entries per channel.
  CHECK(fft_elements_moved(l, s) == 2 * 16 * 8 * 4 * 3 / 4);
  CHECK(describe_fft_stages(l, s).find("all-to-all on axis 0: dim 2 -> dim 3") !=
        std::string::npos);
}

TEST_CASE("pencil: one transpose per sharded dim; axes of one rank stay") {
  const auto p = plan_fft_stages(layout({1, 1, 8, 8, 8}, {-1, -1, 0, 1, -1}, {2, 2}));
  CHECK(moves(p) == 2);
  CHECK(plan_fft_stages(layout({1, 1, 8, 8, 8}, {-1, -1, 0, 1, -1}, {1, 1})).size() == 3);
}

TEST_CASE("every spatial dim sharded: an axis parks on the channels and returns to a mode dim") {
  const auto s = plan_fft_stages(layout({1, 4, 8, 8}, {-1, -1, 0, 1}, {2, 2}));
  CHECK(moves(s) == 3);
  CHECK(s.back().placement[1] == -1);  // channels whole for the spectral mixing
  const auto d = layout({1, 1, 8, 8}, {2, 3, 0, 1}, {2, 2, 2, 2});  // no free dim at all
  CHECK_THROWS_WITH(plan_fft_stages(d), Catch::Contains("every other dim is sharded"));
}

TEST_CASE("a requested spectrum layout is reached; bad requests are refused") {
  FftLayout l = layout({1, 2, 8, 8}, {-1, -1, 0, -1}, {2});
  l.spectrum_axis = {-1, -1, 0, -1};  // back to the input's layout
  const auto s = plan_fft_stages(l);
  CHECK(s.back().placement == l.spectrum_axis);
  CHECK(moves(s) == 2);
  l.spectrum_axis = {-1, -1, -1, -1};
  CHECK_THROWS_WITH(plan_fft_stages(l), Catch::Contains("keep each mesh axis"));
  // One axis on two dims (the second entry was ignored), an axis the mesh lacks.
  l.spectrum_axis = {-1, -1, 0, 0};
  CHECK_THROWS_WITH(plan_fft_stages(l), Catch::Contains("puts mesh axis 0 on dims 2 and 3"));
  l.spectrum_axis = {-1, -1, 5, -1};
  CHECK_THROWS_WITH(plan_fft_stages(l), Catch::Contains("entry 5 for dim 2 is no mesh axis"));
}
