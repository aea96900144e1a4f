// Entry points of kernels/fft.hpp: one per op, dispatched once on the device.
#include "kernels/fft.hpp"

#include <cmath>

#include "decomp/error.hpp"
#include "kernels/device/memory.hpp"

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

FftBlock fft_block_around(const std::vector<Index>& shape, int d) {
  FftBlock b;
  for (int e = 0; e < static_cast<int>(shape.size()); ++e) {
    if (e < d) b.outer *= shape[static_cast<std::size_t>(e)];
    if (e > d) b.inner *= shape[static_cast<std::size_t>(e)];
  }
  b.n = shape.at(static_cast<std::size_t>(d));
  return b;
}

namespace {
Index volume(const std::vector<Index>& s) {
  Index v = 1;
  for (Index e : s) v *= e;
  return v;
}

void check_dims(const std::vector<Index>& shape, const std::vector<int>& dims, const char* what) {
  TESSERA_CHECK(!dims.empty(), what << ": no dims to transform");
  for (std::size_t i = 0; i < dims.size(); ++i)
    TESSERA_CHECK(dims[i] >= 0 && dims[i] < static_cast<int>(shape.size()) &&
                      (i == 0 || dims[i] > dims[i - 1]),
                  what << ": dims must be ascending dims of the array");
}

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
             double scale, HalfWeight w, bool keep_input) {
  check_real(real, "fft_c2r");
  check_block(b, "fft_c2r");
  if (b.outer * b.inner == 0) return;
  if (dev.is_host()) return cpu::fft_c2r(real, b, in, out, scale, w, keep_input);
  if constexpr (kCudaEnabled) return cuda::fft_c2r(dev, real, b, in, out, scale, w, keep_input);
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

void fft_r2c_dims(const Device& dev, DType real, const std::vector<Index>& shape,
                  const std::vector<int>& dims, const void* in, void* out, double scale,
                  HalfWeight w) {
  check_real(real, "fft_r2c_dims");
  check_dims(shape, dims, "fft_r2c_dims");
  if (volume(shape) == 0) return;
  if (dev.is_host()) return cpu::fft_r2c_dims(real, shape, dims, in, out, scale, w);
  // The device: the real dim first, then the others in place on the half spectrum.
  fft_r2c(dev, real, fft_block_around(shape, dims.back()), in, out, scale, w);
  std::vector<Index> half = shape;
  half[static_cast<std::size_t>(dims.back())] =
      shape[static_cast<std::size_t>(dims.back())] / 2 + 1;
  for (std::size_t i = 0; i + 1 < dims.size(); ++i)
    fft_c2c(dev, complex_of(real), fft_block_around(half, dims[i]), out, out, -1, 1.0);
}

void fft_c2r_dims(const Device& dev, DType real, const std::vector<Index>& shape,
                  const std::vector<int>& dims, const void* in, void* out, double scale,
                  HalfWeight w, bool keep_input) {
  check_real(real, "fft_c2r_dims");
  check_dims(shape, dims, "fft_c2r_dims");
  if (volume(shape) == 0) return;
  if (dev.is_host()) return cpu::fft_c2r_dims(real, shape, dims, in, out, scale, w, keep_input);
  if (dims.size() == 1)
    return fft_c2r(dev, real, fft_block_around(shape, dims[0]), in, out, scale, w, keep_input);
  // The device: the complex dims first (on a copy unless the input may go), then the real.
  std::vector<Index> half = shape;
  half[static_cast<std::size_t>(dims.back())] =
      shape[static_cast<std::size_t>(dims.back())] / 2 + 1;
  const std::size_t bytes = static_cast<std::size_t>(volume(half)) * size_of(complex_of(real));
  void* z = keep_input ? mem_alloc(MemSpace::Cuda, bytes) : const_cast<void*>(in);  // tracked
  try {
    for (std::size_t i = 0; i + 1 < dims.size(); ++i)
      fft_c2c(dev, complex_of(real), fft_block_around(half, dims[i]), i == 0 ? in : z, z, 1, 1.0);
    fft_c2r(dev, real, fft_block_around(shape, dims.back()), z, out, scale, w, false);
  } catch (...) {
    if (keep_input) mem_free(MemSpace::Cuda, z, bytes);
    throw;
  }
  if (keep_input) {
    device::synchronize(dev);  // the transforms read z until they finish
    mem_free(MemSpace::Cuda, z, bytes);
  }
}

void fft_c2c_dims(const Device& dev, DType cplx, const std::vector<Index>& shape,
                  const std::vector<int>& dims, const void* in, void* out, int sign, double scale) {
  TESSERA_CHECK(is_complex(cplx),
                "fft_c2c_dims takes complex64 or complex128 data, not " << name_of(cplx));
  check_dims(shape, dims, "fft_c2c_dims");
  if (volume(shape) == 0) return;
  if (dev.is_host()) return cpu::fft_c2c_dims(cplx, shape, dims, in, out, sign, scale);
  for (std::size_t i = 0; i < dims.size(); ++i)
    fft_c2c(dev, cplx, fft_block_around(shape, dims[i]), i == 0 ? in : out, out, sign,
            i + 1 == dims.size() ? scale : 1.0);
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
