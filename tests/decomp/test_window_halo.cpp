#include <catch2/catch.hpp>
#include <random>

#include "decomp/error.hpp"
#include "decomp/window_halo.hpp"

using namespace tessera;

namespace {
struct Case1d {
  Index n;
  WindowDim w;
  std::vector<Index> in_sizes;
  bool periodic;
};

Case1d random_case(std::mt19937& rng) {
  Case1d c;
  c.w.kernel = 1 + rng() % 5;
  c.w.stride = 1 + rng() % 3;
  c.w.dilation = 1 + rng() % 3;
  c.w.pad_lo = rng() % c.w.span();  // narrower than the window
  c.w.pad_hi = rng() % c.w.span();
  c.periodic = rng() % 3 == 0;
  c.n = c.w.span() + rng() % 12;
  const int parts = 1 + rng() % 6;
  c.in_sizes.assign(parts, 0);
  if (rng() % 2) {
    for (Index i = 0; i < c.n; ++i) ++c.in_sizes[rng() % parts];
  } else {
    c.in_sizes = balanced_sizes(c.n, parts);
  }
  return c;
}

Index wrap(Index x, Index n) {
  return ((x % n) + n) % n;
}
}  // namespace

TEST_CASE("Aligned output split puts each output with the owner of its window centre",
          "[window_halo]") {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 400; ++trial) {
    const Case1d c = random_case(rng);
    const BlockPartition in(Box({0}, {c.n}), {c.in_sizes});
    const Index nout = c.w.out_extent(c.n);
    for (OutputSplit s : {OutputSplit::Balanced, OutputSplit::Aligned}) {
      const auto sizes =
          split_output(in, 0, nout, s, [&](Index x) { return conv_first_output_at(c.w, x); });
      const BlockPartition out(Box({0}, {nout}), {sizes});  // throws unless they sum to nout
      if (s == OutputSplit::Balanced) {
        CHECK(sizes == balanced_sizes(nout, static_cast<int>(c.in_sizes.size())));
        continue;
      }
      for (Index o = 0; o < nout; ++o) {
        Index centre = o * c.w.stride - c.w.pad_lo + c.w.dilation * ((c.w.kernel - 1) / 2);
        centre = std::clamp<Index>(centre, 0, c.n - 1);
        CHECK(out.owner(&o) == in.owner(&centre));
      }
    }
  }
}

TEST_CASE("Conv windows: every tap of every output lies in its block's window or padding",
          "[window_halo]") {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 400; ++trial) {
    const Case1d c = random_case(rng);
    const BlockPartition in(Box({0}, {c.n}), {c.in_sizes});
    WindowDim w = c.w;
    if (c.periodic) w.pad_hi = w.pad_lo;  // circular padding is symmetric
    const Index nout = w.out_extent(c.n);
    const auto sizes =
        split_output(in, 0, nout, trial % 2 ? OutputSplit::Aligned : OutputSplit::Balanced,
                     [&](Index x) { return conv_first_output_at(w, x); });
    const BlockPartition out(Box({0}, {nout}), {sizes});
    const WindowHalo wh(in, out, {window_reach(w, c.periodic)});
    INFO("n " << c.n << " k " << w.kernel << " s " << w.stride << " d " << w.dilation << " pad "
              << w.pad_lo << "," << w.pad_hi << " periodic " << c.periodic);
    for (int b = 0; b < in.num_blocks(); ++b) {
      const BlockWindow& bw = wh.block(b);
      const Box ob = out.block(b);
      CHECK(bw.idle == ob.empty());
      if (bw.idle) {
        CHECK(bw.left[0] == 0);
        CHECK(bw.right[0] == 0);
        continue;
      }
      // The window sits inside the padded block.
      CHECK(bw.window.lo[0] >= bw.owned.lo[0] - bw.left[0]);
      CHECK(bw.window.hi[0] <= bw.owned.hi[0] + bw.right[0]);
      // The widths are the least that hold the window.
      CHECK((bw.left[0] == 0 || bw.window.lo[0] == bw.owned.lo[0] - bw.left[0]));
      CHECK((bw.right[0] == 0 || bw.window.hi[0] == bw.owned.hi[0] + bw.right[0]));
      // The local kernel on the window with the clipped padding makes exactly this block.
      WindowDim local = w;
      local.pad_lo = bw.clip_lo[0];
      local.pad_hi = bw.clip_hi[0];
      CHECK(local.out_extent(bw.window.extent(0)) >= ob.extent(0));
      CHECK((bw.window.extent(0) + local.pad_lo + local.pad_hi - w.span()) / w.stride + 1 ==
            ob.extent(0));
      Index min_tap = c.n, max_tap = -1;
      for (Index o = ob.lo[0]; o < ob.hi[0]; ++o) {
        for (Index j = 0; j < w.kernel; ++j) {
          const Index x = o * w.stride - w.pad_lo + j * w.dilation;  // padded frame
          const bool inside = x >= bw.window.lo[0] && x < bw.window.hi[0];
          // Open dims: a tap outside the window must be padding; periodic: none is.
          if (c.periodic)
            CHECK(inside);
          else
            CHECK((inside || x < 0 || x >= c.n));
          if (x >= 0 && x < c.n) {
            min_tap = std::min(min_tap, x);
            max_tap = std::max(max_tap, x);
          }
        }
      }
      // The kernel's local tap j of local output 0 is window cell -clip_lo + j*d.
      CHECK(bw.touched.lo[0] == ob.lo[0] * w.stride - w.pad_lo);
      if (!c.periodic && max_tap >= 0) {
        CHECK(bw.window.lo[0] <= min_tap);
        CHECK(bw.window.hi[0] > max_tap);
      }
      (void)wrap;
    }
  }
}

TEST_CASE("Transposed conv windows hold every output cell a block's inputs write",
          "[window_halo]") {
  std::mt19937 rng(9);
  for (int trial = 0; trial < 400; ++trial) {
    Case1d c = random_case(rng);
    // c.n input cells; the transposed output has (n-1)*s - pad_lo - pad_hi + span cells.
    const WindowDim& w = c.w;
    const Index nout = (c.n - 1) * w.stride - w.pad_lo - w.pad_hi + w.span();
    if (nout <= 0) continue;
    const BlockPartition in(Box({0}, {c.n}), {c.in_sizes});
    const auto sizes =
        split_output(in, 0, nout, trial % 2 ? OutputSplit::Aligned : OutputSplit::Balanced,
                     [&](Index x) { return transposed_first_output_at(w, x); });
    const BlockPartition out(Box({0}, {nout}), {sizes});
    const WindowHalo wh(out, in, {window_reach(w, false)});
    for (int b = 0; b < in.num_blocks(); ++b) {
      const BlockWindow& bw = wh.block(b);
      const Box ib = in.block(b);
      if (ib.empty()) {
        CHECK(bw.idle);
        continue;
      }
      for (Index i = ib.lo[0]; i < ib.hi[0]; ++i)
        for (Index j = 0; j < w.kernel; ++j) {
          const Index y = i * w.stride - w.pad_lo + j * w.dilation;
          CHECK((y < 0 || y >= nout || (y >= bw.window.lo[0] && y < bw.window.hi[0])));
        }
      CHECK(bw.window.lo[0] >= bw.owned.lo[0] - bw.left[0]);
      CHECK(bw.window.hi[0] <= bw.owned.hi[0] + bw.right[0]);
    }
  }
}

TEST_CASE("Kernel == stride with aligned outputs needs no halo; bad geometry throws",
          "[window_halo]") {
  WindowDim patch;
  patch.kernel = patch.stride = 2;
  const BlockPartition in(Box({0, 0}, {3, 16}), {{3}, {6, 4, 6}});
  const auto sizes = split_output(in, 1, 8, OutputSplit::Aligned,
                                  [&](Index x) { return conv_first_output_at(patch, x); });
  CHECK(sizes == std::vector<Index>{3, 2, 3});
  const BlockPartition out(Box({0, 0}, {5, 8}), {{5}, sizes});
  const WindowHalo wh(in, out, {no_reach(), window_reach(patch, false)});
  CHECK_FALSE(wh.any_ghosts());
  CHECK(wh.block(1).window == Box({0, 6}, {3, 10}));  // dim 0 has no reach: all its own cells
  // Padding as wide as the window leaves block 0 (outputs 0 and 1) nothing but padding.
  WindowDim wide;
  wide.pad_lo = wide.pad_hi = 2;
  const BlockPartition in1(Box({0}, {4}), std::vector<std::vector<Index>>{{2, 2}});
  const BlockPartition out1(Box({0}, {8}), std::vector<std::vector<Index>>{{2, 6}});
  CHECK_THROWS_AS(WindowHalo(in1, out1, {window_reach(wide, false)}), Error);
  CHECK_THROWS_AS(WindowHalo(in1, out, {window_reach(wide, false)}), Error);  // grids differ
}
