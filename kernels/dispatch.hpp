#pragma once
// Calls fn(T{}) with T = float or double for a runtime DType, so entry points taking
// void* buffers instantiate their templates once per element type. Other element types
// (int64, bf16 storage) are refused here, once, for every compute kernel.
#include "kernels/floor.hpp"
#include "decomp/dtype.hpp"
#include "decomp/error.hpp"

namespace tessera::kernels {

template <class Fn>
decltype(auto) dispatch(DType s, Fn&& fn) {
  TESSERA_CHECK(s == DType::f32 || s == DType::f64,
                "compute kernels take float32 or float64, not " << name_of(s));
  if (s == DType::f64) return fn(double{});
  return fn(float{});
}

}  // namespace tessera::kernels
