// Host FFTs through FFTW's guru64 interface: one plan per (kind, precision, block shape,
// sign, in-place, alignment, threads, effort), made once under a lock (FFTW's planner is
// not thread-safe) and run with the new-array execute calls on any arrays of that shape.
#include <fftw3.h>
#include <omp.h>

#include <complex>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>

#include "decomp/error.hpp"
#include "kernels/fft.hpp"

namespace tessera::kernels {
namespace {

template <class R>
struct Fftw;

template <>
struct Fftw<double> {
  using Plan = fftw_plan;
  using Cpx = fftw_complex;
  using Dim = fftw_iodim64;
  static void init_threads() { fftw_init_threads(); }
  static void threads(int n) { fftw_plan_with_nthreads(n); }
  static Plan r2c(const Dim* d, const Dim* h, double* i, Cpx* o, unsigned f) {
    return fftw_plan_guru64_dft_r2c(1, d, 2, h, i, o, f);
  }
  static Plan c2r(const Dim* d, const Dim* h, Cpx* i, double* o, unsigned f) {
    return fftw_plan_guru64_dft_c2r(1, d, 2, h, i, o, f);
  }
  static Plan c2c(const Dim* d, const Dim* h, Cpx* i, Cpx* o, int s, unsigned f) {
    return fftw_plan_guru64_dft(1, d, 2, h, i, o, s, f);
  }
  static void run_r2c(Plan p, double* i, Cpx* o) { fftw_execute_dft_r2c(p, i, o); }
  static void run_c2r(Plan p, Cpx* i, double* o) { fftw_execute_dft_c2r(p, i, o); }
  static void run_c2c(Plan p, Cpx* i, Cpx* o) { fftw_execute_dft(p, i, o); }
  static int alignment_of(const void* p) {
    return fftw_alignment_of(static_cast<double*>(const_cast<void*>(p)));
  }
};

template <>
struct Fftw<float> {
  using Plan = fftwf_plan;
  using Cpx = fftwf_complex;
  using Dim = fftwf_iodim64;
  static void init_threads() { fftwf_init_threads(); }
  static void threads(int n) { fftwf_plan_with_nthreads(n); }
  static Plan r2c(const Dim* d, const Dim* h, float* i, Cpx* o, unsigned f) {
    return fftwf_plan_guru64_dft_r2c(1, d, 2, h, i, o, f);
  }
  static Plan c2r(const Dim* d, const Dim* h, Cpx* i, float* o, unsigned f) {
    return fftwf_plan_guru64_dft_c2r(1, d, 2, h, i, o, f);
  }
  static Plan c2c(const Dim* d, const Dim* h, Cpx* i, Cpx* o, int s, unsigned f) {
    return fftwf_plan_guru64_dft(1, d, 2, h, i, o, s, f);
  }
  static void run_r2c(Plan p, float* i, Cpx* o) { fftwf_execute_dft_r2c(p, i, o); }
  static void run_c2r(Plan p, Cpx* i, float* o) { fftwf_execute_dft_c2r(p, i, o); }
  static void run_c2c(Plan p, Cpx* i, Cpx* o) { fftwf_execute_dft(p, i, o); }
  static int alignment_of(const void* p) {
    return fftwf_alignment_of(static_cast<float*>(const_cast<void*>(p)));
  }
};

enum class Kind { R2C, C2R, C2C };

struct PlanKey {
  Kind kind;
  bool dbl;
  Index outer, n, inner;
  int sign;
  bool in_place, aligned;
  int threads;
  bool measure;
  auto tie() const {
    return std::tie(kind, dbl, outer, n, inner, sign, in_place, aligned, threads, measure);
  }
  bool operator<(const PlanKey& o) const { return tie() < o.tie(); }
};

std::mutex planner_lock;  // FFTW's planner (not its execute) must be serialized
bool measure_plans = false;
std::map<PlanKey, void*> plans;  // plans live for the process (they are small)

int plan_threads() {
  static const bool inited = [] {
    Fftw<double>::init_threads();
    Fftw<float>::init_threads();
    return true;
  }();
  (void)inited;
  return omp_in_parallel() ? 1 : omp_get_max_threads();
}

// The guru dims of the transform along n and of the batch (outer, inner).
template <class Dim>
void layout(const FftBlock& b, Index n_in, Index n_out, Dim* d, Dim* h) {
  d[0] = Dim{b.n, b.inner, b.inner};
  h[0] = Dim{b.outer, n_in * b.inner, n_out * b.inner};
  h[1] = Dim{b.inner, 1, 1};
}

// Planning arrays: Estimate plans on the caller's arrays (it does not touch them);
// Measure plans on scratch of the same alignment (it overwrites what it plans on).
struct PlanArrays {
  void* in;
  void* out;
  void* owned = nullptr;
  PlanArrays(const PlanKey& k, std::size_t in_bytes, std::size_t out_bytes, void* i, void* o)
      : in(i), out(o) {
    if (!k.measure) return;
    owned = fftw_malloc(k.in_place ? std::max(in_bytes, out_bytes) : in_bytes + out_bytes + 64);
    TESSERA_CHECK(owned, "FFTW: cannot allocate planning scratch");
    in = owned;
    out = k.in_place ? owned
                     : static_cast<char*>(owned) + ((in_bytes + 63) / 64) * 64;  // stays aligned
  }
  ~PlanArrays() { fftw_free(owned); }
};

template <class R>
typename Fftw<R>::Plan get_plan(Kind kind, const FftBlock& b, const void* in, void* out, int sign) {
  using F = Fftw<R>;
  using Cpx = typename F::Cpx;
  const int threads = plan_threads();
  const bool aligned = F::alignment_of(in) == 0 && F::alignment_of(out) == 0;
  std::lock_guard<std::mutex> lock(planner_lock);
  const PlanKey key{kind,      std::is_same_v<R, double>,
                    b.outer,   b.n,
                    b.inner,   sign,
                    in == out, aligned,
                    threads,   measure_plans};
  if (auto it = plans.find(key); it != plans.end())
    return static_cast<typename F::Plan>(it->second);
  const Index bins = b.bins();
  const Index n_in = kind == Kind::C2R ? bins : b.n, n_out = kind == Kind::R2C ? bins : b.n;
  const std::size_t in_bytes = static_cast<std::size_t>(b.outer * n_in * b.inner) *
                               (kind == Kind::R2C ? sizeof(R) : sizeof(Cpx));
  const std::size_t out_bytes = static_cast<std::size_t>(b.outer * n_out * b.inner) *
                                (kind == Kind::C2R ? sizeof(R) : sizeof(Cpx));
  typename F::Dim d[1], h[2];
  layout(b, n_in, n_out, d, h);
  F::threads(threads);
  PlanArrays a(key, in_bytes, out_bytes, const_cast<void*>(in), out);
  // c2r runs on a scratch copy and may destroy it; r2c and c2c keep the caller's input.
  unsigned flags = (measure_plans ? FFTW_MEASURE : FFTW_ESTIMATE) |
                   (kind == Kind::C2R ? FFTW_DESTROY_INPUT : FFTW_PRESERVE_INPUT);
  if (!aligned) flags |= FFTW_UNALIGNED;
  typename F::Plan p = nullptr;
  if (kind == Kind::R2C)
    p = F::r2c(d, h, static_cast<R*>(a.in), static_cast<Cpx*>(a.out), flags);
  else if (kind == Kind::C2R)
    p = F::c2r(d, h, static_cast<Cpx*>(a.in), static_cast<R*>(a.out), flags);
  else
    p = F::c2c(d, h, static_cast<Cpx*>(a.in), static_cast<Cpx*>(a.out), sign, flags);
  TESSERA_CHECK(p, "FFTW could not plan a transform of " << b.n << " points (batch " << b.outer
                                                         << " x " << b.inner << ")");
  plans.emplace(key, static_cast<void*>(p));
  return p;
}

// Multiplies the half spectrum (outer, bins, inner) by scale and the Hermitian weights.
template <class R>
void weigh(std::complex<R>* z, const FftBlock& b, double scale, HalfWeight w) {
  const Index bins = b.bins(), last_interior = (b.n - 1) / 2;
  const double wi = w == HalfWeight::DoubleInterior  ? 2.0
                    : w == HalfWeight::HalveInterior ? 0.5
                                                     : 1;
  if (scale == 1.0 && wi == 1.0) return;
#pragma omp parallel for collapse(2) schedule(static)
  for (Index o = 0; o < b.outer; ++o)
    for (Index k = 0; k < bins; ++k) {
      const R f = static_cast<R>(k >= 1 && k <= last_interior ? scale * wi : scale);
      std::complex<R>* row = z + (o * bins + k) * b.inner;
      for (Index i = 0; i < b.inner; ++i) row[i] *= f;
    }
}

template <class T>
void scale_all(T* x, Index count, double scale) {
  if (scale == 1.0) return;
  using R = decltype(std::real(x[0]));
  const R f = static_cast<R>(scale);
#pragma omp parallel for schedule(static)
  for (Index i = 0; i < count; ++i) x[i] *= f;
}

// Per-thread scratch for the c2r input copy (FFTW's c2r overwrites its input).
void* c2r_scratch(std::size_t bytes) {
  struct Buf {
    void* p = nullptr;
    std::size_t n = 0;
    ~Buf() { fftw_free(p); }
  };
  thread_local Buf buf;
  if (buf.n < bytes) {
    fftw_free(buf.p);
    buf.p = fftw_malloc(bytes);
    TESSERA_CHECK(buf.p, "FFTW: cannot allocate " << bytes << " bytes of c2r scratch");
    buf.n = bytes;
  }
  return buf.p;
}

template <class R>
void r2c(const FftBlock& b, const void* in, void* out, double scale, HalfWeight w) {
  using F = Fftw<R>;
  auto p = get_plan<R>(Kind::R2C, b, in, out, -1);
  F::run_r2c(p, static_cast<R*>(const_cast<void*>(in)), static_cast<typename F::Cpx*>(out));
  weigh(static_cast<std::complex<R>*>(out), b, scale, w);
}

template <class R>
void c2r(const FftBlock& b, const void* in, void* out, double scale, HalfWeight w) {
  using F = Fftw<R>;
  const Index count = b.outer * b.bins() * b.inner;
  auto* z = static_cast<std::complex<R>*>(
      c2r_scratch(static_cast<std::size_t>(count) * sizeof(std::complex<R>)));
  std::memcpy(z, in, static_cast<std::size_t>(count) * sizeof(std::complex<R>));
  weigh(z, b, 1.0, w);
  auto p = get_plan<R>(Kind::C2R, b, z, out, 1);
  F::run_c2r(p, reinterpret_cast<typename F::Cpx*>(z), static_cast<R*>(out));
  scale_all(static_cast<R*>(out), b.outer * b.n * b.inner, scale);
}

template <class R>
void c2c(const FftBlock& b, const void* in, void* out, int sign, double scale) {
  using F = Fftw<R>;
  auto p = get_plan<R>(Kind::C2C, b, in, out, sign);
  F::run_c2c(p, static_cast<typename F::Cpx*>(const_cast<void*>(in)),
             static_cast<typename F::Cpx*>(out));
  scale_all(static_cast<std::complex<R>*>(out), b.outer * b.n * b.inner, scale);
}

}  // namespace

void cpu::fft_r2c(DType real, const FftBlock& b, const void* in, void* out, double scale,
                  HalfWeight w) {
  if (real == DType::f64) return r2c<double>(b, in, out, scale, w);
  return r2c<float>(b, in, out, scale, w);
}

void cpu::fft_c2r(DType real, const FftBlock& b, const void* in, void* out, double scale,
                  HalfWeight w) {
  if (real == DType::f64) return c2r<double>(b, in, out, scale, w);
  return c2r<float>(b, in, out, scale, w);
}

void cpu::fft_c2c(DType cplx, const FftBlock& b, const void* in, void* out, int sign,
                  double scale) {
  if (cplx == DType::c128) return c2c<double>(b, in, out, sign, scale);
  return c2c<float>(b, in, out, sign, scale);
}

void cpu::set_fft_planning(FftPlanning p) {
  std::lock_guard<std::mutex> lock(planner_lock);
  measure_plans = p == FftPlanning::Measure;
}

std::size_t cpu::fft_cached_plans() {
  std::lock_guard<std::mutex> lock(planner_lock);
  return plans.size();
}

}  // namespace tessera::kernels
