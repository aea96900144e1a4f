#pragma once
// Calls fn(T{}) with T = float or double for a runtime Scalar, so entry points taking
// void* buffers instantiate their templates once per element type.
#include "kernels/scalar.hpp"

namespace tessera::kernels {

template <class Fn>
decltype(auto) dispatch(Scalar s, Fn&& fn) {
  if (s == Scalar::F64) return fn(double{});
  return fn(float{});
}

}  // namespace tessera::kernels
