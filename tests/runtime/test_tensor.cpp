#include <catch2/catch.hpp>

#include "kernels/device/device.hpp"
#include "runtime/tensor/tensor.hpp"

using namespace tessera;

namespace {
Tensor iota(const std::vector<Index>& shape) {
  Tensor t = Tensor::empty(shape, DType::i64);
  for (Index i = 0; i < t.numel(); ++i) t.data<std::int64_t>()[i] = i;
  return t;
}
}  // namespace

TEST_CASE("Tensor shape, strides, dtype", "[tensor]") {
  Tensor t = Tensor::zeros({2, 3, 4}, DType::f64);
  CHECK(t.numel() == 24);
  CHECK(t.strides() == std::vector<Index>{12, 4, 1});
  CHECK(t.nbytes() == 24 * 8);
  CHECK(t.is_contiguous());
  CHECK(t.at<double>({1, 2, 3}) == 0.0);
  CHECK_THROWS_WITH(t.data<float>(), Catch::Contains("tensor is float64"));
  CHECK_THROWS_WITH(t.at<double>({2, 0, 0}), Catch::Contains("out of range"));
  CHECK(size_of(DType::bf16) == 2);
  CHECK(dtype_from_name("float32") == DType::f32);
  CHECK_THROWS_AS(dtype_from_name("half"), Error);
}

TEST_CASE("Shapes past 2^63 elements or bytes are refused, not wrapped", "[tensor]") {
  const Index big = Index{1} << 62;
  // 2^62 x 4 wraps to 0 elements in 64 bits: a tiny buffer, written past its end.
  CHECK_THROWS_WITH(Tensor::empty({big, 4}, DType::f32),
                    Catch::Contains("holds more than 2^63 elements"));
  CHECK_THROWS_WITH(Tensor::empty({big, 1}, DType::f64),
                    Catch::Contains("of float64 holds more than 2^63 bytes"));
  CHECK_THROWS_WITH(numel_of({3, big, 8}), Catch::Contains("(3, 4611686018427387904, 8)"));
  CHECK(numel_of({big, 1, 1}) == big);
}

TEST_CASE("Tensor views of a box share storage and read the right cells", "[tensor]") {
  Tensor t = iota({4, 5, 6});
  Tensor v = t.view(Box({1, 2, 0}, {3, 5, 4}));
  REQUIRE(v.shape() == std::vector<Index>{2, 3, 4});
  REQUIRE_FALSE(v.is_contiguous());
  bool ok = true;
  for (Index i = 0; i < 2; ++i)
    for (Index j = 0; j < 3; ++j)
      for (Index k = 0; k < 4; ++k)
        ok = ok && v.at<std::int64_t>({i, j, k}) == (i + 1) * 30 + (j + 2) * 6 + k;
  REQUIRE(ok);
  v.at<std::int64_t>({0, 0, 0}) = -1;  // writes through to the parent
  CHECK(t.at<std::int64_t>({1, 2, 0}) == -1);
  Tensor c = v.clone();
  REQUIRE(c.is_contiguous());
  CHECK(c.at<std::int64_t>({1, 2, 3}) == t.at<std::int64_t>({2, 4, 3}));
  CHECK_THROWS_WITH(t.view(Box({0, 0, 0}, {5, 1, 1})), Catch::Contains("outside shape"));
  // Views of views compose.
  Tensor vv = v.view(Box({1, 1, 1}, {2, 3, 3}));
  CHECK(vv.at<std::int64_t>({0, 1, 1}) == 2 * 30 + 4 * 6 + 2);
}

TEST_CASE("copy_from between strided views; zero of a view", "[tensor]") {
  Tensor a = iota({6, 7});
  Tensor b = Tensor::zeros({6, 7}, DType::i64);
  b.view(Box({1, 2}, {4, 6})).copy_from(a.view(Box({2, 0}, {5, 4})));
  bool ok = true;
  for (Index i = 0; i < 6; ++i)
    for (Index j = 0; j < 7; ++j) {
      const bool inside = i >= 1 && i < 4 && j >= 2 && j < 6;
      ok = ok && b.at<std::int64_t>({i, j}) == (inside ? (i + 1) * 7 + (j - 2) : 0);
    }
  REQUIRE(ok);
  a.view(Box({0, 1}, {6, 2})).zero();
  for (Index i = 0; i < 6; ++i) REQUIRE(a.at<std::int64_t>({i, 1}) == 0);
  CHECK(a.at<std::int64_t>({3, 2}) == 23);
  CHECK_THROWS_WITH(b.copy_from(Tensor::zeros({6, 6}, DType::i64)), Catch::Contains("shape"));
  CHECK_THROWS_WITH(b.copy_from(Tensor::zeros({6, 7}, DType::f64)), Catch::Contains("dtype"));
}

TEST_CASE("Memory accounting tracks current and peak bytes", "[tensor]") {
  reset_peak_memory(MemSpace::Host);
  const auto before = memory_stats(MemSpace::Host);
  {
    Tensor t = Tensor::empty({1024, 1024}, DType::f32);
    CHECK(memory_stats(MemSpace::Host).current == before.current + 4 * 1024 * 1024);
  }
  CHECK(memory_stats(MemSpace::Host).current == before.current);
  CHECK(memory_stats(MemSpace::Host).peak >= before.current + 4 * 1024 * 1024);
}

TEST_CASE("CUDA tensors without a device fail clearly", "[tensor]") {
  if (device::count() > 0) {
    SUCCEED("a CUDA device exists: covered by test_gpu");
    return;
  }
  CHECK_THROWS_AS(Tensor::empty({4}, DType::f32, MemSpace::Cuda), Error);
  // Built with CUDA on a machine without a device: said so, not as a raw CUDA error.
  CHECK_THROWS_WITH(
      Tensor::empty({4}, DType::f32, MemSpace::Cuda),
      Catch::Contains(kCudaEnabled ? "no CUDA device is visible" : "built without CUDA"));
}

TEST_CASE("Large host blocks are cached and reused, not counted as live", "[tensor]") {
  release_cached_host_memory();
  void* first = nullptr;
  {
    Tensor t = Tensor::empty({1 << 20}, DType::f32);  // 4 MiB
    first = t.raw();
  }
  CHECK(cached_host_bytes() == 4u << 20);
  const auto live = memory_stats(MemSpace::Host).current;
  Tensor again = Tensor::empty({1 << 20}, DType::f32);
  CHECK(again.raw() == first);
  CHECK(cached_host_bytes() == 0);
  CHECK(memory_stats(MemSpace::Host).current == live + (4u << 20));
}
