#pragma once
// Element types. bf16 is a storage type: it can be moved and copied; arithmetic
// (reductions, layers) runs in float32 and refuses bf16 with a clear error.
#include <cstddef>
#include <cstdint>
#include <string>

namespace tessera {

enum class DType { f32, f64, i64, bf16 };

struct bf16_t {
  std::uint16_t bits;
};

std::size_t size_of(DType t);
std::string name_of(DType t);
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
template <class T>
inline constexpr DType dtype_of_v = dtype_of<T>::value;

}  // namespace tessera
