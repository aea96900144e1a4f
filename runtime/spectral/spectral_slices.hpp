#pragma once
// Spectral steps on a local contiguous tensor: the FFT kernels over some of its dims, and
// along one dim d the truncation to retained modes with its
// adjoint, the zero-padding back to the full extent (low modes [0, m), high [n-m, n)).
#include "runtime/floor.hpp"
#include "kernels/fft.hpp"
#include "runtime/tensor/tensor.hpp"

namespace tessera::spectral {

// Real -> complex (n/2+1 bins along the last of `dims`), complex -> real (n points there), and
// complex -> complex (sign -1 forward, +1 backward, unscaled) over several dims at once
// (ascending; the last of them is the real dim): one multi-dim transform (FFTW's own on the
// host). z survives c2r unless may_destroy; in_place transforms z itself (a temporary the
// caller owns).
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
