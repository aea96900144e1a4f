#pragma once
// Local FFTs along one dim of a contiguous array viewed as (outer, n, inner), batched over
// outer and inner: real-to-complex, complex-to-real and complex-to-complex, float and
// double. Host: FFTW (plans cached by shape, layout, alignment and threads; threads from
// OpenMP). CUDA: cuFFT (plans cached per device, run on the Device's stream). Transforms
// over several dims are sequences of these (runtime/spectral composes them with the
// truncations and transposes in between).
//
// Conventions are numpy's and PyTorch's: the forward transform has sign -1, r2c keeps
// bins 0..n/2, and a normalization ("backward", "ortho", "forward") puts 1/n on the
// inverse, 1/sqrt(n) on both, or 1/n on the forward. Every entry takes the scale to apply
// explicitly (fft_scale gives it), so adjoints reuse the same calls.
#include "kernels/floor.hpp"
#include <cstddef>
#include <string>
#include <vector>

#include "decomp/dtype.hpp"
#include "decomp/index.hpp"
#include "kernels/device/device.hpp"

namespace tessera::kernels {

enum class FftNorm { Backward, Ortho, Forward };
FftNorm fft_norm_from_name(const std::string& name);  // "backward", "ortho", "forward"
std::string name_of(FftNorm n);
// The factor a forward (inverse = false) or inverse transform over `points` points applies.
double fft_scale(FftNorm norm, bool inverse, double points);

// A contiguous row-major array (outer, n, inner); the transform runs along n.
struct FftBlock {
  Index outer = 1, n = 1, inner = 1;
  Index bins() const { return n / 2 + 1; }  // complex length of a real transform of n
};

// The (outer, n, inner) view of a contiguous array of `shape` around dim d.
FftBlock fft_block_around(const std::vector<Index>& shape, int d);

// Hermitian weights of the half spectrum of a real transform, for exact adjoints:
// interior bins (1 .. (n-1)/2) stand for two bins of the full spectrum.
enum class HalfWeight { None, DoubleInterior, HalveInterior };

// real (outer, n, inner) -> complex (outer, n/2+1, inner), times scale, then weighted.
void fft_r2c(const Device& dev, DType real, const FftBlock& b, const void* in, void* out,
             double scale, HalfWeight w = HalfWeight::None);
// complex (outer, n/2+1, inner) -> real (outer, n, inner), weighted first, times scale.
// With keep_input `in` is left as it was (the transform runs on a copy); without, it is
// overwritten (the caller's scratch). The imaginary parts of bin 0 (and of bin n/2 for
// even n) are ignored, as numpy's irfft does.
void fft_c2r(const Device& dev, DType real, const FftBlock& b, const void* in, void* out,
             double scale, HalfWeight w = HalfWeight::None, bool keep_input = true);
// complex (outer, n, inner) -> complex, sign -1 (forward) or +1, times scale; in == out
// transforms in place.
void fft_c2c(const Device& dev, DType cplx, const FftBlock& b, const void* in, void* out, int sign,
             double scale);

// Several dims at once of a contiguous array of (real) `shape`, along `dims` (ascending;
// for r2c and c2r the last of them is the real, halved dim): one FFTW plan on the host, as
// its own multi-dim transforms do; a sequence of the 1-D transforms on the device. Weights
// apply along the halved dim, scale once.
void fft_r2c_dims(const Device& dev, DType real, const std::vector<Index>& shape,
                  const std::vector<int>& dims, const void* in, void* out, double scale,
                  HalfWeight w = HalfWeight::None);
void fft_c2r_dims(const Device& dev, DType real, const std::vector<Index>& shape,
                  const std::vector<int>& dims, const void* in, void* out, double scale,
                  HalfWeight w = HalfWeight::None, bool keep_input = true);
void fft_c2c_dims(const Device& dev, DType cplx, const std::vector<Index>& shape,
                  const std::vector<int>& dims, const void* in, void* out, int sign, double scale);

// FFTW planner effort for plans made from now on (host): Estimate plans at once without
// touching data; Measure times candidates once per shape (the benchmark's choice).
enum class FftPlanning { Estimate, Measure };
void set_fft_planning(FftPlanning p);
std::size_t fft_cached_plans();  // host and device plans made so far, all alive

namespace cpu {
void fft_r2c(DType real, const FftBlock& b, const void* in, void* out, double scale, HalfWeight w);
void fft_c2r(DType real, const FftBlock& b, const void* in, void* out, double scale, HalfWeight w,
             bool keep_input);
void fft_c2c(DType cplx, const FftBlock& b, const void* in, void* out, int sign, double scale);
void fft_r2c_dims(DType real, const std::vector<Index>& shape, const std::vector<int>& dims,
                  const void* in, void* out, double scale, HalfWeight w);
void fft_c2r_dims(DType real, const std::vector<Index>& shape, const std::vector<int>& dims,
                  const void* in, void* out, double scale, HalfWeight w, bool keep_input);
void fft_c2c_dims(DType cplx, const std::vector<Index>& shape, const std::vector<int>& dims,
                  const void* in, void* out, int sign, double scale);
void set_fft_planning(FftPlanning p);
std::size_t fft_cached_plans();
}  // namespace cpu
namespace cuda {
void fft_r2c(const Device& dev, DType real, const FftBlock& b, const void* in, void* out,
             double scale, HalfWeight w);
void fft_c2r(const Device& dev, DType real, const FftBlock& b, const void* in, void* out,
             double scale, HalfWeight w, bool keep_input);
void fft_c2c(const Device& dev, DType cplx, const FftBlock& b, const void* in, void* out, int sign,
             double scale);
std::size_t fft_cached_plans();
}  // namespace cuda

}  // namespace tessera::kernels
