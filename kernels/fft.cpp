// Entry points of kernels/fft.hpp: one per op, dispatched once on the device.
#include "kernels/fft.hpp"

#include <cmath>

#include "decomp/error.hpp"

namespace tessera::kernels {

FftNorm fft_norm_from_name(const std::string& name) {
  if (name == "backward") return FftNorm::Backward;
  if (name == "ortho") return FftNorm::Ortho;
  if (name == "forward") return FftNorm::Forward;
  throw Error("unknown FFT normalization '" + name + "' (backward, ortho or forward)");
}

std::string name_of(FftNorm n) {
  switch (n) {
    case FftNorm::Backward:
      return "backward";
    case FftNorm::Ortho:
      return "ortho";
    case FftNorm::Forward:
      return "forward";
  }
  return "?";
}

double fft_scale(FftNorm norm, bool inverse, double points) {
  if (norm == FftNorm::Ortho) return 1.0 / std::sqrt(points);
  const bool scaled = inverse ? norm == FftNorm::Backward : norm == FftNorm::Forward;
  return scaled ? 1.0 / points : 1.0;
}

namespace {
void check_block(const FftBlock& b, const char* what) {
  TESSERA_CHECK(b.outer >= 0 && b.n >= 1 && b.inner >= 0, what << ": bad block (outer " << b.outer
                                                               << ", n " << b.n << ", inner "
                                                               << b.inner << ")");
}
void check_real(DType t, const char* what) {
  TESSERA_CHECK(t == DType::f32 || t == DType::f64,
                what << " takes float32 or float64 data, not " << name_of(t));
}
}  // namespace

void fft_r2c(const Device& dev, DType real, const FftBlock& b, const void* in, void* out,
             double scale, HalfWeight w) {
  check_real(real, "fft_r2c");
  check_block(b, "fft_r2c");
  if (b.outer * b.inner == 0) return;
  if (dev.is_host()) return cpu::fft_r2c(real, b, in, out, scale, w);
  if constexpr (kCudaEnabled) return cuda::fft_r2c(dev, real, b, in, out, scale, w);
  throw_without_cuda("fft_r2c");
}

void fft_c2r(const Device& dev, DType real, const FftBlock& b, const void* in, void* out,
             double scale, HalfWeight w) {
  check_real(real, "fft_c2r");
  check_block(b, "fft_c2r");
  if (b.outer * b.inner == 0) return;
  if (dev.is_host()) return cpu::fft_c2r(real, b, in, out, scale, w);
  if constexpr (kCudaEnabled) return cuda::fft_c2r(dev, real, b, in, out, scale, w);
  throw_without_cuda("fft_c2r");
}

void fft_c2c(const Device& dev, DType cplx, const FftBlock& b, const void* in, void* out, int sign,
             double scale) {
  TESSERA_CHECK(is_complex(cplx),
                "fft_c2c takes complex64 or complex128 data, not " << name_of(cplx));
  TESSERA_CHECK(sign == -1 || sign == 1, "fft_c2c: sign is -1 or +1, not " << sign);
  check_block(b, "fft_c2c");
  if (b.outer * b.inner == 0) return;
  if (dev.is_host()) return cpu::fft_c2c(cplx, b, in, out, sign, scale);
  if constexpr (kCudaEnabled) return cuda::fft_c2c(dev, cplx, b, in, out, sign, scale);
  throw_without_cuda("fft_c2c");
}

void set_fft_planning(FftPlanning p) {
  cpu::set_fft_planning(p);
}

std::size_t fft_cached_plans() {
  std::size_t n = cpu::fft_cached_plans();
  if constexpr (kCudaEnabled) n += cuda::fft_cached_plans();
  return n;
}

}  // namespace tessera::kernels
