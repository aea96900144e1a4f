#include <catch2/catch.hpp>
#include <random>

#include "kernels/strided_copy.hpp"

using namespace tessera;
using namespace tessera::kernels;

TEST_CASE("simplify merges contiguous dims and keeps offsets (property)", "[kernels]") {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 300; ++trial) {
    StridedCopy c;
    c.ndim = 1 + static_cast<int>(rng() % 5);
    // Strides of a random window into a random row-major parent.
    Index ss = 1, ds = 1;
    for (int d = c.ndim - 1; d >= 0; --d) {
      c.shape[d] = 1 + static_cast<Index>(rng() % 4);
      c.src_stride[d] = ss;
      c.dst_stride[d] = ds;
      ss *= c.shape[d] + static_cast<Index>(rng() % 2);
      ds *= c.shape[d] + static_cast<Index>(rng() % 2);
    }
    const StridedCopy s = simplify(c);
    REQUIRE(s.count() == c.count());
    REQUIRE(s.ndim <= c.ndim);
    bool ok = true;
    for (Index i = 0; i < c.count(); ++i) {
      Index a, b, x, y;
      c.offsets(i, a, b);
      s.offsets(i, x, y);
      ok = ok && a == x && b == y;
    }
    REQUIRE(ok);
  }
}

TEST_CASE("strided_copy_host equals the element-by-element definition", "[kernels]") {
  std::mt19937 rng(6);
  for (int trial = 0; trial < 100; ++trial) {
    StridedCopy c;
    c.ndim = 1 + static_cast<int>(rng() % 4);
    Index ss = 1 + static_cast<Index>(rng() % 2), ds = 1;
    for (int d = c.ndim - 1; d >= 0; --d) {
      c.shape[d] = static_cast<Index>(rng() % 4);
      c.src_stride[d] = ss;
      c.dst_stride[d] = ds;
      ss *= c.shape[d] + 2;
      ds *= c.shape[d] + static_cast<Index>(rng() % 3);
    }
    std::vector<double> src(static_cast<std::size_t>(ss * 2 + 8)),
        dst(static_cast<std::size_t>(ds * 2 + 8), -1), ref = dst;
    for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<double>(i);
    for (Index i = 0; i < c.count(); ++i) {
      Index a, b;
      c.offsets(i, a, b);
      ref[static_cast<std::size_t>(b)] = src[static_cast<std::size_t>(a)];
    }
    strided_copy(Device::host(), dst.data(), src.data(), c, sizeof(double));
    REQUIRE(dst == ref);
  }
}
