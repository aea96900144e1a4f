#pragma once
// A float64 exponential written so that a loop of it vectorizes (the library targets generic
// x86-64, and libm's exp is a call per element). Compile its users with -fno-trapping-math
// (kernels/CMakeLists.txt): the clamps then become vector blends.
#include "kernels/floor.hpp"
#include <bit>
#include <cstdint>

namespace tessera::kernels::cpu {

// e^x within about 1 ulp (0.9 measured on vector units, 1.2 in scalar code), branch-free so
// a loop of it vectorizes: x = n ln 2 + r with |r| <= ln 2 / 2 (ln 2 in two parts, Cody and
// Waite, so n ln 2 is exact), e^r by its Taylor series to r^13 (truncation below 1e-17), 2^n
// from the exponent bits in two factors, so results in the subnormals (within one unit of
// the last place of std::exp's), 0 and the overflow to inf come out as std::exp's. x is clamped to
// [-746, 710], where e^x is already 0 and inf; -inf gives 0, +inf gives inf, a NaN stays a NaN.
inline double exp_accurate(double x) {
  constexpr double kShift = 6755399441055744.0;  // 1.5 2^52: the low bits of x + it hold round(x)
  constexpr double kLog2e = 1.4426950408889634;
  constexpr double kLn2Hi = 6.93147180369123816490e-01, kLn2Lo = 1.90821492927058770002e-10;
  // Compares a vector loop takes (as blends, with -fno-trapping-math: kernels/CMakeLists.txt);
  // they turn a NaN into a bound, and the last line gives it back.
  const double xu = x < 710.0 ? x : 710.0;
  const double xc = xu > -746.0 ? xu : -746.0;
  const double big = xc * kLog2e + kShift;
  const double n = big - kShift;
  const double r = (xc - n * kLn2Hi) - n * kLn2Lo;
  double p = 1.0 / 6227020800.0;  // 1/13!
  p = p * r + 1.0 / 479001600.0;
  p = p * r + 1.0 / 39916800.0;
  p = p * r + 1.0 / 3628800.0;
  p = p * r + 1.0 / 362880.0;
  p = p * r + 1.0 / 40320.0;
  p = p * r + 1.0 / 5040.0;
  p = p * r + 1.0 / 720.0;
  p = p * r + 1.0 / 120.0;
  p = p * r + 1.0 / 24.0;
  p = p * r + 1.0 / 6.0;
  p = p * r + 0.5;
  p = p * r + 1.0;
  p = p * r + 1.0;
  // n in [-1076, 1024]: 2^n as 2^h 2^(n - h), each factor a normal number; the first
  // product is exact, the second rounds once (into the subnormals, or to inf).
  const std::int64_t e = std::bit_cast<std::int64_t>(big) - std::bit_cast<std::int64_t>(kShift);
  const std::int64_t h = e >> 1;
  const double y =
      p * std::bit_cast<double>((h + 1023) << 52) * std::bit_cast<double>((e - h + 1023) << 52);
  return x == x ? y : x;
}

}  // namespace tessera::kernels::cpu
