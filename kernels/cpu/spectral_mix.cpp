// Host spectral mixing: rows of modes are contiguous, so each product is a multiply-add of
// interleaved (re, im) rows that the compiler vectorizes; spelled out on the parts because
// std::complex's operator* takes the slow C99 Annex G path (inf/nan recovery).
#include <vector>

#include "kernels/spectral_mix.hpp"

namespace tessera::kernels {
namespace {

// acc[m] += a[m] * (conj_b ? conj(b[m]) : b[m]), or conj(a[m]) * b[m] with conj_a.
template <class R>
inline void cmac(R* __restrict acc, const R* __restrict a, const R* __restrict b, Index modes,
                 bool conj_a, bool conj_b) {
  const R sa = conj_a ? R(-1) : R(1), sb = conj_b ? R(-1) : R(1);
#pragma omp simd
  for (Index m = 0; m < modes; ++m) {
    const R ar = a[2 * m], ai = sa * a[2 * m + 1], br = b[2 * m], bi = sb * b[2 * m + 1];
    acc[2 * m] += ar * br - ai * bi;
    acc[2 * m + 1] += ar * bi + ai * br;
  }
}

template <class R>
void mix(const MixShape& s, const R* x, const R* w, R* out) {
  const Index M2 = 2 * s.modes;
#pragma omp parallel for collapse(2) schedule(static)
  for (Index n = 0; n < s.batch; ++n)
    for (Index o = 0; o < s.cout; ++o) {
      R* acc = out + (n * s.cout + o) * M2;
      for (Index m = 0; m < M2; ++m) acc[m] = 0;
      for (Index i = 0; i < s.cin; ++i)
        cmac(acc, x + (n * s.cin + i) * M2, w + (i * s.cout + o) * M2, s.modes, false, false);
    }
}

template <class R>
void mix_dx(const MixShape& s, const R* dy, const R* w, R* dx) {
  const Index M2 = 2 * s.modes;
#pragma omp parallel for collapse(2) schedule(static)
  for (Index n = 0; n < s.batch; ++n)
    for (Index i = 0; i < s.cin; ++i) {
      R* acc = dx + (n * s.cin + i) * M2;
      for (Index m = 0; m < M2; ++m) acc[m] = 0;
      for (Index o = 0; o < s.cout; ++o)
        cmac(acc, dy + (n * s.cout + o) * M2, w + (i * s.cout + o) * M2, s.modes, false, true);
    }
}

template <class R>
void mix_dw(const MixShape& s, const R* x, const R* dy, R* dw) {
  const Index M2 = 2 * s.modes;
#pragma omp parallel for collapse(2) schedule(static)
  for (Index i = 0; i < s.cin; ++i)
    for (Index o = 0; o < s.cout; ++o) {
      R* acc = dw + (i * s.cout + o) * M2;  // adds into the existing gradient
      for (Index n = 0; n < s.batch; ++n)
        cmac(acc, x + (n * s.cin + i) * M2, dy + (n * s.cout + o) * M2, s.modes, true, false);
    }
}

}  // namespace

void cpu::spectral_mix(DType t, const MixShape& s, const void* x, const void* w, void* out) {
  if (t == DType::c128)
    return mix(s, static_cast<const double*>(x), static_cast<const double*>(w),
               static_cast<double*>(out));
  mix(s, static_cast<const float*>(x), static_cast<const float*>(w), static_cast<float*>(out));
}

void cpu::spectral_mix_dx(DType t, const MixShape& s, const void* dy, const void* w, void* dx) {
  if (t == DType::c128)
    return mix_dx(s, static_cast<const double*>(dy), static_cast<const double*>(w),
                  static_cast<double*>(dx));
  mix_dx(s, static_cast<const float*>(dy), static_cast<const float*>(w), static_cast<float*>(dx));
}

void cpu::spectral_mix_dw(DType t, const MixShape& s, const void* x, const void* dy, void* dw) {
  if (t == DType::c128)
    return mix_dw(s, static_cast<const double*>(x), static_cast<const double*>(dy),
                  static_cast<double*>(dw));
  mix_dw(s, static_cast<const float*>(x), static_cast<const float*>(dy), static_cast<float*>(dw));
}

}  // namespace tessera::kernels
