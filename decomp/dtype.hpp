#pragma once
// Element types. bf16 is a storage type: it can be moved and copied; arithmetic
// (reductions, layers) runs in float32 and refuses bf16 with a clear error. c64 and c128
// are std::complex<float/double> (two reals, real part first: FFTW's, cuFFT's, numpy's and
// h5py's layout); spectra of the FFT layers live in them.
#include <complex>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "decomp/host_device.hpp"

namespace tessera {

enum class DType { f32, f64, i64, bf16, c64, c128 };

struct bf16_t {
  std::uint16_t bits;
};

// float32 bits -> bf16 bits (bf16 is float32's upper half), rounding to nearest even; the
// host conversions and the CUDA kernel share it. A NaN stays a quiet NaN of its sign: the
// rounding's carry would turn it into an infinity or a signed zero.
TESSERA_HD inline std::uint16_t bf16_bits_from_float_bits(std::uint32_t u) {
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x0040u);
  return static_cast<std::uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// float32 <-> bf16 on the host.
inline bf16_t bf16_from_float(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return {bf16_bits_from_float_bits(u)};
}
inline float float_from_bf16(bf16_t b) {
  const std::uint32_t u = static_cast<std::uint32_t>(b.bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

std::size_t size_of(DType t);
std::string name_of(DType t);
bool is_complex(DType t);
// The real type of a complex type's parts (f32 for c64); a real type maps to itself.
DType real_part_of(DType t);
// The complex type over a real type (c64 for f32); refuses other types.
DType complex_of(DType t);
DType dtype_from_name(const std::string& name);  // "float32", "f32", "float64", ...

template <class T>
struct dtype_of;
template <>
struct dtype_of<float> {
  static constexpr DType value = DType::f32;
};
template <>
struct dtype_of<double> {
  static constexpr DType value = DType::f64;
};
template <>
struct dtype_of<std::int64_t> {
  static constexpr DType value = DType::i64;
};
template <>
struct dtype_of<bf16_t> {
  static constexpr DType value = DType::bf16;
};
template <>
struct dtype_of<std::complex<float>> {
  static constexpr DType value = DType::c64;
};
template <>
struct dtype_of<std::complex<double>> {
  static constexpr DType value = DType::c128;
};
template <class T>
inline constexpr DType dtype_of_v = dtype_of<T>::value;

}  // namespace tessera
