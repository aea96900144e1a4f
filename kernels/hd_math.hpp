#pragma once
// Math functions callable from host and device code in the precision of their argument
// (erff/expf/tanhf for float), so CPU and CUDA kernels evaluate the same formulas.
#include "kernels/floor.hpp"
#include <math.h>

#include "decomp/host_device.hpp"

namespace tessera::kernels {

TESSERA_HD inline float hd_erf(float x) {
  return erff(x);
}
TESSERA_HD inline double hd_erf(double x) {
  return erf(x);
}
TESSERA_HD inline float hd_exp(float x) {
  return expf(x);
}
TESSERA_HD inline double hd_exp(double x) {
  return exp(x);
}
TESSERA_HD inline float hd_tanh(float x) {
  return tanhf(x);
}
TESSERA_HD inline double hd_tanh(double x) {
  return tanh(x);
}

// floor(a / b) for b > 0 and any sign of a.
TESSERA_HD inline long long floor_div(long long a, long long b) {
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}
TESSERA_HD inline long long min_i(long long a, long long b) {
  return a < b ? a : b;
}
TESSERA_HD inline long long max_i(long long a, long long b) {
  return a > b ? a : b;
}

}  // namespace tessera::kernels
