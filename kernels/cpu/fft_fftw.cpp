// Host FFTs through FFTW's guru64 interface: one plan per (kind, precision, block shape,
// sign, in-place, alignment, threads, effort), made once under a lock (FFTW's planner is
// not thread-safe) and run with the new-array execute calls on any arrays of that shape.
#include <fftw3.h>
#include <omp.h>

#include <algorithm>
#include <array>
#include <complex>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

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
  static Plan r2c(int r, const Dim* d, int hr, const Dim* h, double* i, Cpx* o, unsigned f) {
    return fftw_plan_guru64_dft_r2c(r, d, hr, h, i, o, f);
  }
  static Plan c2r(int r, const Dim* d, int hr, const Dim* h, Cpx* i, double* o, unsigned f) {
    return fftw_plan_guru64_dft_c2r(r, d, hr, h, i, o, f);
  }
  static Plan c2c(int r, const Dim* d, int hr, const Dim* h, Cpx* i, Cpx* o, int s, unsigned f) {
    return fftw_plan_guru64_dft(r, d, hr, h, i, o, s, f);
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
  static Plan r2c(int r, const Dim* d, int hr, const Dim* h, float* i, Cpx* o, unsigned f) {
    return fftwf_plan_guru64_dft_r2c(r, d, hr, h, i, o, f);
  }
  static Plan c2r(int r, const Dim* d, int hr, const Dim* h, Cpx* i, float* o, unsigned f) {
    return fftwf_plan_guru64_dft_c2r(r, d, hr, h, i, o, f);
  }
  static Plan c2c(int r, const Dim* d, int hr, const Dim* h, Cpx* i, Cpx* o, int s, unsigned f) {
    return fftwf_plan_guru64_dft(r, d, hr, h, i, o, s, f);
  }
  static void run_r2c(Plan p, float* i, Cpx* o) { fftwf_execute_dft_r2c(p, i, o); }
  static void run_c2r(Plan p, Cpx* i, float* o) { fftwf_execute_dft_c2r(p, i, o); }
  static void run_c2c(Plan p, Cpx* i, Cpx* o) { fftwf_execute_dft(p, i, o); }
  static int alignment_of(const void* p) {
    return fftwf_alignment_of(static_cast<float*>(const_cast<void*>(p)));
  }
};

enum class Kind { R2C, C2R, C2C };

// A transform's geometry in FFTW's guru terms: the transformed dims and the batch dims,
// each (n, input stride, output stride) in elements, and the element counts of both arrays.
struct Geometry {
  std::vector<std::array<Index, 3>> dims, batch;
  Index in_count = 0, out_count = 0;
};

// The geometry of a contiguous array of `shape` transformed along `tdims` (ascending); for
// R2C the last of them is halved in the output, for C2R in the input.
Geometry geometry_of(Kind kind, const std::vector<Index>& shape, const std::vector<int>& tdims) {
  std::vector<Index> in = shape, out = shape;
  const auto h = static_cast<std::size_t>(tdims.back());
  if (kind == Kind::R2C) out[h] = shape[h] / 2 + 1;
  if (kind == Kind::C2R) in[h] = shape[h] / 2 + 1;
  Geometry g;
  g.in_count = g.out_count = 1;
  std::vector<Index> is(shape.size()), os(shape.size());
  for (std::size_t d = shape.size(); d-- > 0;) {
    is[d] = g.in_count;
    os[d] = g.out_count;
    g.in_count *= in[d];
    g.out_count *= out[d];
  }
  for (std::size_t d = 0; d < shape.size(); ++d) {
    const bool t = std::find(tdims.begin(), tdims.end(), static_cast<int>(d)) != tdims.end();
    if (!t && shape[d] == 1) continue;
    (t ? g.dims : g.batch).push_back({shape[d], is[d], os[d]});
  }
  return g;
}

struct PlanKey {
  Kind kind;
  bool dbl;
  std::vector<std::array<Index, 3>> dims, batch;
  int sign;
  bool in_place, aligned;
  int threads;
  bool measure;
  auto tie() const {
    return std::tie(kind, dbl, dims, batch, sign, in_place, aligned, threads, measure);
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
typename Fftw<R>::Plan get_plan(Kind kind, const Geometry& g, const void* in, void* out, int sign) {
  using F = Fftw<R>;
  using Cpx = typename F::Cpx;
  const int threads = plan_threads();
  const bool aligned = F::alignment_of(in) == 0 && F::alignment_of(out) == 0;
  std::lock_guard<std::mutex> lock(planner_lock);
  const PlanKey key{
      kind,         std::is_same_v<R, double>, g.dims, g.batch, sign, in == out, aligned, threads,
      measure_plans};
  if (auto it = plans.find(key); it != plans.end())
    return static_cast<typename F::Plan>(it->second);
  const std::size_t in_bytes =
      static_cast<std::size_t>(g.in_count) * (kind == Kind::R2C ? sizeof(R) : sizeof(Cpx));
  const std::size_t out_bytes =
      static_cast<std::size_t>(g.out_count) * (kind == Kind::C2R ? sizeof(R) : sizeof(Cpx));
  std::vector<typename F::Dim> d, h;
  for (const auto& e : g.dims) d.push_back({e[0], e[1], e[2]});
  for (const auto& e : g.batch) h.push_back({e[0], e[1], e[2]});
  const int r = static_cast<int>(d.size()), hr = static_cast<int>(h.size());
  F::threads(threads);
  PlanArrays a(key, in_bytes, out_bytes, const_cast<void*>(in), out);
  // c2r runs on a scratch copy and may destroy it; r2c and c2c keep the caller's input.
  unsigned flags = (measure_plans ? FFTW_MEASURE : FFTW_ESTIMATE) |
                   (kind == Kind::C2R ? FFTW_DESTROY_INPUT : FFTW_PRESERVE_INPUT);
  if (!aligned) flags |= FFTW_UNALIGNED;
  typename F::Plan p = nullptr;
  if (kind == Kind::R2C)
    p = F::r2c(r, d.data(), hr, h.data(), static_cast<R*>(a.in), static_cast<Cpx*>(a.out), flags);
  else if (kind == Kind::C2R)
    p = F::c2r(r, d.data(), hr, h.data(), static_cast<Cpx*>(a.in), static_cast<R*>(a.out), flags);
  else
    p = F::c2c(r, d.data(), hr, h.data(), static_cast<Cpx*>(a.in), static_cast<Cpx*>(a.out), sign,
               flags);
  TESSERA_CHECK(
      p, "FFTW could not plan a transform over " << r << " dims (" << in_bytes << " bytes in)");
  plans.emplace(key, static_cast<void*>(p));
  return p;
}

// Multiplies the half spectrum (outer, bins, inner) by scale and the Hermitian weights:
// one factor per bin, applied in contiguous runs (rows of `inner`, or rows of bins).
template <class R>
void weigh(std::complex<R>* z, const FftBlock& b, double scale, HalfWeight w) {
  const Index bins = b.bins(), last_interior = (b.n - 1) / 2;
  const double wi = w == HalfWeight::DoubleInterior  ? 2.0
                    : w == HalfWeight::HalveInterior ? 0.5
                                                     : 1;
  if (scale == 1.0 && wi == 1.0) return;
  std::vector<R> f(static_cast<std::size_t>(bins));
  for (Index k = 0; k < bins; ++k)
    f[static_cast<std::size_t>(k)] =
        static_cast<R>(k >= 1 && k <= last_interior ? scale * wi : scale);
  R* x = reinterpret_cast<R*>(z);  // (re, im) pairs: both parts take the bin's factor
  if (b.inner == 1) {
#pragma omp parallel for schedule(static)
    for (Index o = 0; o < b.outer; ++o) {
      R* row = x + 2 * o * bins;
#pragma omp simd
      for (Index j = 0; j < 2 * bins; ++j) row[j] *= f[static_cast<std::size_t>(j / 2)];
    }
    return;
  }
#pragma omp parallel for collapse(2) schedule(static)
  for (Index o = 0; o < b.outer; ++o)
    for (Index k = 0; k < bins; ++k) {
      const R fk = f[static_cast<std::size_t>(k)];
      R* row = x + 2 * (o * bins + k) * b.inner;
#pragma omp simd
      for (Index i = 0; i < 2 * b.inner; ++i) row[i] *= fk;
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
void r2c(const std::vector<Index>& shape, const std::vector<int>& dims, const void* in, void* out,
         double scale, HalfWeight w) {
  using F = Fftw<R>;
  const Geometry g = geometry_of(Kind::R2C, shape, dims);
  auto p = get_plan<R>(Kind::R2C, g, in, out, -1);
  F::run_r2c(p, static_cast<R*>(const_cast<void*>(in)), static_cast<typename F::Cpx*>(out));
  weigh(static_cast<std::complex<R>*>(out), fft_block_around(shape, dims.back()), scale, w);
}

template <class R>
void c2r(const std::vector<Index>& shape, const std::vector<int>& dims, const void* in, void* out,
         double scale, HalfWeight w, bool keep) {
  using F = Fftw<R>;
  const Geometry g = geometry_of(Kind::C2R, shape, dims);
  auto* z = static_cast<std::complex<R>*>(const_cast<void*>(in));
  if (keep) {  // FFTW's c2r overwrites its input: run on a copy
    z = static_cast<std::complex<R>*>(
        c2r_scratch(static_cast<std::size_t>(g.in_count) * sizeof(std::complex<R>)));
    std::memcpy(z, in, static_cast<std::size_t>(g.in_count) * sizeof(std::complex<R>));
  }
  weigh(z, fft_block_around(shape, dims.back()), 1.0, w);
  auto p = get_plan<R>(Kind::C2R, g, z, out, 1);
  F::run_c2r(p, reinterpret_cast<typename F::Cpx*>(z), static_cast<R*>(out));
  scale_all(static_cast<R*>(out), g.out_count, scale);
}

template <class R>
void c2c(const std::vector<Index>& shape, const std::vector<int>& dims, const void* in, void* out,
         int sign, double scale) {
  using F = Fftw<R>;
  const Geometry g = geometry_of(Kind::C2C, shape, dims);
  auto p = get_plan<R>(Kind::C2C, g, in, out, sign);
  F::run_c2c(p, static_cast<typename F::Cpx*>(const_cast<void*>(in)),
             static_cast<typename F::Cpx*>(out));
  scale_all(static_cast<std::complex<R>*>(out), g.out_count, scale);
}

std::vector<Index> shape_of(const FftBlock& b) {
  return {b.outer, b.n, b.inner};
}

}  // namespace

void cpu::fft_r2c(DType real, const FftBlock& b, const void* in, void* out, double scale,
                  HalfWeight w) {
  cpu::fft_r2c_dims(real, shape_of(b), {1}, in, out, scale, w);
}

void cpu::fft_r2c_dims(DType real, const std::vector<Index>& shape, const std::vector<int>& dims,
                       const void* in, void* out, double scale, HalfWeight w) {
  if (real == DType::f64) return r2c<double>(shape, dims, in, out, scale, w);
  return r2c<float>(shape, dims, in, out, scale, w);
}

void cpu::fft_c2r(DType real, const FftBlock& b, const void* in, void* out, double scale,
                  HalfWeight w, bool keep_input) {
  cpu::fft_c2r_dims(real, shape_of(b), {1}, in, out, scale, w, keep_input);
}

void cpu::fft_c2r_dims(DType real, const std::vector<Index>& shape, const std::vector<int>& dims,
                       const void* in, void* out, double scale, HalfWeight w, bool keep_input) {
  if (real == DType::f64) return c2r<double>(shape, dims, in, out, scale, w, keep_input);
  return c2r<float>(shape, dims, in, out, scale, w, keep_input);
}

void cpu::fft_c2c(DType cplx, const FftBlock& b, const void* in, void* out, int sign,
                  double scale) {
  cpu::fft_c2c_dims(cplx, shape_of(b), {1}, in, out, sign, scale);
}

void cpu::fft_c2c_dims(DType cplx, const std::vector<Index>& shape, const std::vector<int>& dims,
                       const void* in, void* out, int sign, double scale) {
  if (cplx == DType::c128) return c2c<double>(shape, dims, in, out, sign, scale);
  return c2c<float>(shape, dims, in, out, sign, scale);
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
