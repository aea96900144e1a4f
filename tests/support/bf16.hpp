#pragma once
// bfloat16 in tests: host tensors rounded to bf16 and read back as float32, and a check that
// a bf16 result is the float32 answer rounded, within one bf16 unit.
#include <algorithm>
#include <cmath>
#include <utility>

#include "runtime/tensor/tensor.hpp"

namespace tessera::test {

// x (float32, host) rounded to bf16: the bf16 tensor and its values in float32.
inline std::pair<Tensor, Tensor> rounded_bf16(const Tensor& x) {
  Tensor b = Tensor::empty(x.shape(), DType::bf16), f = Tensor::empty(x.shape(), DType::f32);
  for (Index i = 0; i < x.numel(); ++i) {
    b.data<bf16_t>()[i] = bf16_from_float(x.data<float>()[i]);
    f.data<float>()[i] = float_from_bf16(b.data<bf16_t>()[i]);
  }
  return {b, f};
}

// A bf16 tensor (host or device) in float32 on the host.
inline Tensor bf16_as_f32(const Tensor& b) {
  const Tensor h = b.to(MemSpace::Host).contiguous();
  Tensor f = Tensor::empty(h.shape(), DType::f32);
  for (Index i = 0; i < h.numel(); ++i) f.data<float>()[i] = float_from_bf16(h.data<bf16_t>()[i]);
  return f;
}

// got (bf16) is want (float32) rounded: every element within one bf16 unit of want (2^-7
// relative; a float32 sum in another order may round to the neighbour), plus 1e-5 of the
// largest magnitude for elements near zero.
inline bool within_one_bf16_unit(const Tensor& got, const Tensor& want) {
  if (got.dtype() != DType::bf16 || got.shape() != want.shape()) return false;
  const Tensor g = bf16_as_f32(got), w = want.contiguous();
  double top = 0;
  for (Index i = 0; i < w.numel(); ++i) top = std::max(top, std::fabs(double(w.data<float>()[i])));
  for (Index i = 0; i < w.numel(); ++i) {
    const double a = g.data<float>()[i], b = w.data<float>()[i];
    if (!(std::fabs(a - b) <= std::ldexp(std::fabs(b), -7) + 1e-5 * top)) return false;
  }
  return true;
}

}  // namespace tessera::test
