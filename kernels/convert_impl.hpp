#pragma once
// The conversion functors shared by the host loop and the CUDA kernel.
#include "kernels/floor.hpp"
#include <cstdint>
#include <cstring>

#include "decomp/dtype.hpp"
#include "decomp/host_device.hpp"

namespace tessera::kernels {

TESSERA_HD inline std::uint32_t float_bits(float f) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(f);
#else
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}

TESSERA_HD inline float float_of_bits(std::uint32_t u) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}

// As bf16_from_float (decomp/dtype.hpp), on either side.
TESSERA_HD inline std::uint16_t bf16_bits_of(float f) {
  return bf16_bits_from_float_bits(float_bits(f));
}

TESSERA_HD inline float float_of_bf16_bits(std::uint16_t b) {
  return float_of_bits(static_cast<std::uint32_t>(b) << 16);
}

struct ToBf16 {
  const float* x;
  std::uint16_t* y;
  TESSERA_HD void operator()(std::int64_t i) const { y[i] = bf16_bits_of(x[i]); }
};
struct FromBf16 {
  const std::uint16_t* x;
  float* y;
  TESSERA_HD void operator()(std::int64_t i) const { y[i] = float_of_bf16_bits(x[i]); }
};
template <class From, class To>
struct Cast {
  const From* x;
  To* y;
  TESSERA_HD void operator()(std::int64_t i) const { y[i] = static_cast<To>(x[i]); }
};

// Calls fn with the functor converting x to y for (from, to); false when there is none.
template <class Fn>
bool with_converter(DType from, DType to, const void* x, void* y, Fn&& fn) {
  if (from == DType::f32 && to == DType::bf16)
    return fn(ToBf16{static_cast<const float*>(x), static_cast<std::uint16_t*>(y)}), true;
  if (from == DType::bf16 && to == DType::f32)
    return fn(FromBf16{static_cast<const std::uint16_t*>(x), static_cast<float*>(y)}), true;
  if (from == DType::f32 && to == DType::f64)
    return fn(Cast<float, double>{static_cast<const float*>(x), static_cast<double*>(y)}), true;
  if (from == DType::f64 && to == DType::f32)
    return fn(Cast<double, float>{static_cast<const double*>(x), static_cast<float*>(y)}), true;
  return false;
}

}  // namespace tessera::kernels
