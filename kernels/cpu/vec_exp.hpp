#pragma once
// A float64 exponential written so that a loop of it vectorizes (the library targets generic
// x86-64, and libm's exp is a call per element). Compile its users with -fno-trapping-math
// (kernels/CMakeLists.txt): the clamps then become vector blends.
#include "kernels/floor.hpp"
#include <bit>
#include <cstdint>

namespace tessera::kernels::cpu {

// e^x to about 2 ulp, branch-free so a loop of it vectorizes: x = n ln 2 + r with
// |r| <= ln 2 / 2 (ln 2 in two parts, Cody and Waite, so n ln 2 is exact), e^r by its Taylor
// series to r^13 (truncation below 1e-17), 2^n from the exponent bits. x is clamped to
// [-708, 709] (below, e^x is under 1e-307: softmaxes subtract their maximum first); a NaN stays
// a NaN, and so does -inf (a softmax's -inf comes from infinite inputs only).
inline double exp_accurate(double x) {
  constexpr double kShift = 6755399441055744.0;  // 1.5 2^52: the low bits of x + it hold round(x)
  constexpr double kLog2e = 1.4426950408889634;
  constexpr double kLn2Hi = 6.93147180369123816490e-01, kLn2Lo = 1.90821492927058770002e-10;
  // Compares a vector loop takes (as blends, with -fno-trapping-math: kernels/CMakeLists.txt);
  // they turn a NaN into a bound, and the (x - x) below gives it back.
  const double xu = x < 709.0 ? x : 709.0;
  const double xc = xu > -708.0 ? xu : -708.0;
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
  const std::int64_t e = std::bit_cast<std::int64_t>(big) - std::bit_cast<std::int64_t>(kShift);
  return p * std::bit_cast<double>((e + 1023) << 52) + (x - x);
}

}  // namespace tessera::kernels::cpu
