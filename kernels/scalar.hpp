#pragma once
// Element types the compute kernels take. The kernels layer knows no runtime DType; the
// runtime maps its tensors' dtypes onto these when it calls a kernel.
#include <cstddef>

namespace tessera::kernels {

enum class Scalar { F32, F64 };

inline std::size_t size_of(Scalar s) {
  return s == Scalar::F64 ? 8 : 4;
}
inline const char* name_of(Scalar s) {
  return s == Scalar::F64 ? "float64" : "float32";
}

}  // namespace tessera::kernels
