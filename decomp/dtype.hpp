#pragma once
// Element types. bf16 is a storage type: it can be moved and copied; arithmetic
// (reductions, layers) runs in float32 and refuses bf16 with a clear error. c64 and c128
// are std::complex<float/double> (two reals, real part first: FFTW's, cuFFT's, numpy's and
// h5py's layout); spectra of the FFT layers live in them.
#include <complex>
#include <cstddef>
#include <cstdint>
#include <string>

namespace tessera {

enum class DType { f32, f64, i64, bf16, c64, c128 };

struct bf16_t {
  std::uint16_t bits;
};

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
