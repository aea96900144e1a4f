#pragma once
// One-dim spectral steps on a local contiguous tensor, along dim d: the FFT kernels over
// the (outer, n, inner) view of the tensor, and the truncation to retained modes with its
// adjoint, the zero-padding back to the full extent (low modes [0, m), high [n-m, n)).
#include "runtime/floor.hpp"
#include "kernels/fft.hpp"
#include "runtime/tensor/tensor.hpp"

namespace tessera::spectral {

// The (outer, n, inner) view of a contiguous tensor along dim d.
kernels::FftBlock block_along(const std::vector<Index>& shape, int d);
// Real tensor -> complex tensor with n/2+1 bins along d.
Tensor r2c(const Tensor& x, int d, double scale, kernels::HalfWeight w = kernels::HalfWeight::None);
// Complex tensor with n/2+1 bins along d -> real tensor with n points along d; z survives
// unless may_destroy (a temporary the caller owns: saves a copy).
Tensor c2r(const Tensor& z, int d, Index n, double scale,
           kernels::HalfWeight w = kernels::HalfWeight::None, bool may_destroy = false);
// Complex -> complex along d (sign -1 forward, +1 backward), unscaled; in_place transforms
// z itself (a temporary the caller owns) and returns it.
Tensor c2c(const Tensor& z, int d, int sign, bool in_place = false);
// The same over several dims at once (ascending; for r2c / c2r the last is the real dim):
// one multi-dim transform (FFTW's own on the host).
Tensor r2c_dims(const Tensor& x, const std::vector<int>& dims, double scale,
                kernels::HalfWeight w = kernels::HalfWeight::None);
Tensor c2r_dims(const Tensor& z, const std::vector<int>& dims, Index n, double scale,
                kernels::HalfWeight w = kernels::HalfWeight::None, bool may_destroy = false);
Tensor c2c_dims(const Tensor& z, const std::vector<int>& dims, int sign, bool in_place = false);
// Keeps `kept` entries along d: [0, kept) of a real dim's bins; [0, m) and [n-m, n) with
// m = kept/2 of a complex dim. Returns z itself when nothing is dropped.
Tensor truncate(const Tensor& z, int d, Index kept, bool real_dim);
// The adjoint of truncate: back to the full extent along d (n/2+1 bins of a real dim of n
// points, n of a complex dim), zeros where modes were dropped.
Tensor zero_pad(const Tensor& z, int d, Index n, bool real_dim);

}  // namespace tessera::spectral
