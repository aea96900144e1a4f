// Element type conversion on the host: float32 -> bfloat16 rounds to nearest even exactly as
// decomp/dtype.hpp's bf16_from_float (random values, halfway cases, signed zeros,
// infinities, the largest finite values; NaNs stay NaNs of their sign), bf16 -> float32 is
// exact, float32 <-> float64 as the casts; other pairs are refused.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "decomp/error.hpp"
#include "kernels/convert.hpp"

using namespace tessera;

namespace {
float from_bits(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
}  // namespace

TEST_CASE("convert: bf16 rounding to nearest even, exact widening, float casts", "[convert]") {
  std::mt19937 rng(9);
  std::vector<float> x;
  for (int i = 0; i < 20000; ++i)
    x.push_back(from_bits(static_cast<std::uint32_t>(rng()) & 0x7f7fffffu) *
                (i % 2 ? 1.0f : -1.0f));
  // Exactly halfway between two bf16 values (ties to even, both ways), and specials.
  for (std::uint32_t hi : {0x3f80u, 0x3f81u, 0x4049u, 0xc2c8u})
    x.push_back(from_bits(hi << 16 | 0x8000u));
  const float inf = std::numeric_limits<float>::infinity();
  for (float s : {0.0f, -0.0f, inf, -inf, 1.0f, -2.5f, std::numeric_limits<float>::min(),
                  std::numeric_limits<float>::denorm_min()})
    x.push_back(s);
  const auto n = static_cast<std::int64_t>(x.size());
  std::vector<bf16_t> b(x.size());
  kernels::convert(Device::host(), DType::f32, DType::bf16, n, x.data(), b.data());
  bool same = true;
  for (std::size_t i = 0; i < x.size(); ++i) same = same && b[i].bits == bf16_from_float(x[i]).bits;
  CHECK(same);
  std::vector<float> back(x.size());
  kernels::convert(Device::host(), DType::bf16, DType::f32, n, b.data(), back.data());
  bool exact = true;
  for (std::size_t i = 0; i < x.size(); ++i) exact = exact && back[i] == float_from_bf16(b[i]);
  CHECK(exact);
  // Ties to even: 1 + 2^-8 (halfway between 1 and 1 + 2^-7) rounds down to 1.
  CHECK(bf16_from_float(from_bits(0x3f808000u)).bits == 0x3f80u);
  // NaNs stay NaNs of their sign (quieted), through both the function and the kernel loop:
  // CUDA's canonical NaN 0x7fffffff would round into -0.0, a signalling NaN with a low
  // payload into an infinity.
  const std::vector<std::pair<std::uint32_t, std::uint16_t>> nans{
      {0x7fc00000u, 0x7fc0u}, {0x7fffffffu, 0x7fffu}, {0xffffffffu, 0xffffu},
      {0x7f800001u, 0x7fc0u}, {0x7f808000u, 0x7fc0u}, {0xff800001u, 0xffc0u}};
  for (const auto& [in, want] : nans) {
    const float v = from_bits(in);
    bf16_t k{};
    kernels::convert(Device::host(), DType::f32, DType::bf16, 1, &v, &k);
    CHECK(bf16_from_float(v).bits == want);
    CHECK(k.bits == want);
    CHECK(std::isnan(float_from_bf16(k)));
  }
  std::vector<double> d(x.size());
  kernels::convert(Device::host(), DType::f32, DType::f64, n, x.data(), d.data());
  std::vector<float> f(x.size());
  kernels::convert(Device::host(), DType::f64, DType::f32, n, d.data(), f.data());
  CHECK(std::memcmp(f.data(), x.data(), x.size() * sizeof(float)) == 0);
  CHECK_FALSE(kernels::convertible(DType::i64, DType::f32));
  CHECK_THROWS_WITH(kernels::convert(Device::host(), DType::c64, DType::f32, 1, x.data(), f.data()),
                    Catch::Contains("no conversion from complex64 to float32"));
}
