// CUDA FFTs through cuFFT: one plan per (device, kind, precision, block shape), kept for the
// process; executed on the Device's stream. A plan's work area is not cuFFT's own (that would
// be cudaMalloc'ed per plan and held for the process, outside the tracked allocator, the
// memory limit and the peak figures): it comes from the tracked allocator for each call (its
// device cache makes that free once shapes repeat), as PyTorch's cuFFT plan cache does. A block
// (outer, n, inner) with inner == 1 is one batched plan over outer; otherwise the plan batches over
// inner (stride inner, distance 1) and runs once per outer slice. Scaling and the Hermitian weights
// are one extra launch.
#include <cuComplex.h>
#include <cufft.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <cstdint>
#include <tuple>

#include "decomp/error.hpp"
#include "kernels/cuda/device_loops.cuh"
#include "kernels/fft.hpp"

namespace tessera::kernels {
namespace {

void cufft_check(cufftResult r, const char* what) {
  if (r != CUFFT_SUCCESS)
    throw Error(std::string("cuFFT: ") + what + " failed (cufftResult " + std::to_string(r) + ")");
}

struct PlanKey {
  int device;
  cufftType type;
  Index n, outer, inner;
  auto tie() const { return std::tie(device, type, n, outer, inner); }
  bool operator<(const PlanKey& o) const { return tie() < o.tie(); }
};

struct CachedPlan {
  cufftHandle handle;
  std::size_t work_bytes;  // the work area an execution needs
};

std::mutex plan_lock;
std::map<PlanKey, CachedPlan> plans;

Index in_len(cufftType t, Index n) {
  return (t == CUFFT_C2R || t == CUFFT_Z2D) ? n / 2 + 1 : n;
}
Index out_len(cufftType t, Index n) {
  return (t == CUFFT_R2C || t == CUFFT_D2Z) ? n / 2 + 1 : n;
}

// A block (outer, n, inner) with inner > 1 needs two batch levels; a cuFFT plan has one.
// The plan batches over inner (stride inner, distance 1) and runs once per outer slice - or,
// for complex-to-complex blocks with more outer slices than inner ones, batches over outer
// (distance n x inner) and runs once per inner index: fewer launches. (Real transforms keep
// the first: their per-slice real pointers stay aligned by the scratch fallback below.)
bool batch_outer(cufftType type, const FftBlock& b) {
  return (type == CUFFT_C2C || type == CUFFT_Z2Z) && b.inner > 1 && b.outer > b.inner;
}

CachedPlan get_plan(cufftType type, const FftBlock& b) {
  std::lock_guard<std::mutex> lock(plan_lock);
  const bool by_outer = batch_outer(type, b);
  const PlanKey key{device::current(), type, b.n, b.inner == 1 || by_outer ? b.outer : 1, b.inner};
  if (auto it = plans.find(key); it != plans.end()) return it->second;
  long long n = b.n;
  const long long ni = in_len(type, b.n), no = out_len(type, b.n);
  cufftHandle h;
  std::size_t work = 0;
  auto make = [&] {
    cufft_check(cufftCreate(&h), "cufftCreate");
    cufftResult r = cufftSetAutoAllocation(h, 0);
    if (r != CUFFT_SUCCESS) {
      cufftDestroy(h);
      return r;
    }
    if (b.inner == 1)
      r = cufftMakePlanMany64(h, 1, &n, &n, 1, ni, &n, 1, no, type, b.outer, &work);
    else if (by_outer)
      r = cufftMakePlanMany64(h, 1, &n, &n, b.inner, ni * b.inner, &n, b.inner, no * b.inner, type,
                              b.outer, &work);
    else
      r = cufftMakePlanMany64(h, 1, &n, &n, b.inner, 1, &n, b.inner, 1, type, b.inner, &work);
    if (r != CUFFT_SUCCESS) {
      cufftDestroy(h);           // a failed plan (out of memory) leaks no handle
      (void)cudaGetLastError();  // nor leaves its failed allocation for the next launch check
    }
    return r;
  };
  cufftResult r = make();
  // Planning allocates (not the work area) past the tracked allocator, so it cannot use the
  // blocks the device cache holds: where that is why it failed, give them back and plan once
  // more (as a tracked allocation does).
  if (r == CUFFT_ALLOC_FAILED && release_cached_device_memory() > 0) r = make();
  cufft_check(r, ("cufftMakePlanMany64 for block " + std::to_string(b.outer) + " x " +
                  std::to_string(b.n) + " x " + std::to_string(b.inner))
                     .c_str());
  const CachedPlan plan{h, work};
  plans.emplace(key, plan);
  return plan;
}

// The plan's work area for one call, from the tracked allocator; freed in stream order (the
// device cache hands a block on only to work queued after this call's).
class WorkArea {
 public:
  explicit WorkArea(const CachedPlan& p) : area_(std::max<std::size_t>(p.work_bytes, 1)) {
    cufft_check(cufftSetWorkArea(p.handle, area_.get()), "cufftSetWorkArea");
  }

 private:
  DeviceScratch<unsigned char> area_;
};

// Runs the plan over the whole block: run(input offset, output offset) per launch.
template <class F>
void per_slice(const FftBlock& b, cufftType type, F run) {
  const Index ni = in_len(type, b.n) * b.inner, no = out_len(type, b.n) * b.inner;
  if (b.inner == 1) return run(Index{0}, Index{0});
  if (batch_outer(type, b)) {
    for (Index i = 0; i < b.inner; ++i) run(i, i);
    return;
  }
  for (Index o = 0; o < b.outer; ++o) run(o * ni, o * no);
}

// Scales the half spectrum, the interior bins by wi too; with real_edges, the imaginary
// parts of bin 0 and of the Nyquist bin (the bins past the interior) become 0.
template <class C>
__global__ void weigh_kernel(C* z, Index count, Index bins, Index inner, Index last_interior,
                             double scale, double wi, bool real_edges) {
  for (Index i = blockIdx.x * static_cast<Index>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<Index>(gridDim.x) * blockDim.x) {
    const Index k = (i / inner) % bins;
    const bool interior = k >= 1 && k <= last_interior;
    const double f = interior ? scale * wi : scale;
    z[i].x *= f;
    z[i].y = (real_edges && !interior) ? 0 : z[i].y * f;
  }
}

template <class T>
__global__ void scale_kernel(T* x, Index count, double scale) {
  for (Index i = blockIdx.x * static_cast<Index>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<Index>(gridDim.x) * blockDim.x)
    x[i] *= scale;
}

// Length-1 transforms are copies (times the scale): done here, not through a cuFFT plan.
template <class R>
__global__ void r2c_len1_kernel(const R* x, R* z, Index count, double scale) {
  for (Index i = blockIdx.x * static_cast<Index>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<Index>(gridDim.x) * blockDim.x) {
    z[2 * i] = static_cast<R>(x[i] * scale);
    z[2 * i + 1] = 0;
  }
}
template <class R>
__global__ void c2r_len1_kernel(const R* z, R* x, Index count, double scale) {
  for (Index i = blockIdx.x * static_cast<Index>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<Index>(gridDim.x) * blockDim.x)
    x[i] = static_cast<R>(z[2 * i] * scale);
}

// cuFFT wants real data aligned as its complex type; a slice of an odd-sized block may
// start off that alignment, and then goes through an aligned scratch.
bool aligned_as_complex(const void* p, std::size_t real_size) {
  return reinterpret_cast<std::uintptr_t>(p) % (2 * real_size) == 0;
}

std::string block_str(const FftBlock& b) {
  std::ostringstream o;
  o << "(" << b.outer << ", " << b.n << ", " << b.inner << ")";
  return o.str();
}

double weight_of(HalfWeight w) {
  return w == HalfWeight::DoubleInterior ? 2.0 : w == HalfWeight::HalveInterior ? 0.5 : 1.0;
}

// real_edges: before a c2r. fft_c2r promises numpy's irfft, which ignores the imaginary
// parts of bin 0 and the Nyquist bin; cuFFT leaves input that is not Hermitian undefined
// (and its handling of those parts has changed between versions), and the spectra here
// need not be Hermitian there (an FNO's mixed modes, a c2c over the other dims first).
template <class C>
void weigh(const Device& dev, C* z, const FftBlock& b, double scale, HalfWeight w,
           bool real_edges = false) {
  const double wi = weight_of(w);
  if (scale == 1.0 && wi == 1.0 && !real_edges) return;
  const Index count = b.outer * b.bins() * b.inner;
  weigh_kernel<C><<<cuda_blocks_for(count, 256), 256, 0, stream_of(dev)>>>(
      z, count, b.bins(), b.inner, (b.n - 1) / 2, scale, wi, real_edges);
  check_launch("FFT weights");
}

template <class T>
void scale_real(const Device& dev, T* x, Index count, double scale) {
  if (scale == 1.0) return;
  scale_kernel<T><<<cuda_blocks_for(count, 256), 256, 0, stream_of(dev)>>>(x, count, scale);
  check_launch("FFT scale");
}

}  // namespace

void cuda::fft_r2c(const Device& dev, DType real, const FftBlock& b, const void* in, void* out,
                   double scale, HalfWeight w) {
  const bool dbl = real == DType::f64;
  const std::size_t rs = dbl ? sizeof(double) : sizeof(float);
  const cudaStream_t st = stream_of(dev);
  if (b.n == 1) {  // one bin: the input itself, no interior to weigh
    const Index count = b.outer * b.inner;
    if (dbl)
      r2c_len1_kernel<double><<<cuda_blocks_for(count, 256), 256, 0, st>>>(
          static_cast<const double*>(in), static_cast<double*>(out), count, scale);
    else
      r2c_len1_kernel<float><<<cuda_blocks_for(count, 256), 256, 0, st>>>(
          static_cast<const float*>(in), static_cast<float*>(out), count, scale);
    check_launch("FFT r2c of length 1");
    return;
  }
  const cufftType type = dbl ? CUFFT_D2Z : CUFFT_R2C;
  const CachedPlan plan = get_plan(type, b);
  const cufftHandle h = plan.handle;
  cufft_check(cufftSetStream(h, st), "cufftSetStream");
  const WorkArea work(plan);
  const Index slice = b.inner == 1 ? b.outer * b.n : b.n * b.inner;
  std::optional<DeviceScratch<unsigned char>> aligned;
  per_slice(b, type, [&](Index io, Index oo) {
    const unsigned char* src = static_cast<const unsigned char*>(in) + io * rs;
    if (!aligned_as_complex(src, rs)) {
      if (!aligned) aligned.emplace(static_cast<std::size_t>(slice) * rs);
      TESSERA_CUDA_CHECK(cudaMemcpyAsync(aligned->get(), src, static_cast<std::size_t>(slice) * rs,
                                         cudaMemcpyDeviceToDevice, st));
      src = aligned->get();
    }
    void* x = const_cast<unsigned char*>(src);
    const cufftResult r =
        dbl ? cufftExecD2Z(h, static_cast<double*>(x), static_cast<cuDoubleComplex*>(out) + oo)
            : cufftExecR2C(h, static_cast<float*>(x), static_cast<cuComplex*>(out) + oo);
    cufft_check(
        r,
        (std::string(dbl ? "cufftExecD2Z" : "cufftExecR2C") + " of block " + block_str(b)).c_str());
    device::count_launches(1);
  });
  if (dbl)
    weigh(dev, static_cast<cuDoubleComplex*>(out), b, scale, w);
  else
    weigh(dev, static_cast<cuComplex*>(out), b, scale, w);
}

void cuda::fft_c2r(const Device& dev, DType real, const FftBlock& b, const void* in, void* out,
                   double scale, HalfWeight w, bool keep_input) {
  const bool dbl = real == DType::f64;
  const std::size_t rs = dbl ? sizeof(double) : sizeof(float);
  const cudaStream_t st = stream_of(dev);
  if (b.n == 1) {  // one bin, the real part; the input is only read
    const Index count = b.outer * b.inner;
    if (dbl)
      c2r_len1_kernel<double><<<cuda_blocks_for(count, 256), 256, 0, st>>>(
          static_cast<const double*>(in), static_cast<double*>(out), count, scale);
    else
      c2r_len1_kernel<float><<<cuda_blocks_for(count, 256), 256, 0, st>>>(
          static_cast<const float*>(in), static_cast<float*>(out), count, scale);
    check_launch("FFT c2r of length 1");
    return;
  }
  const cufftType type = dbl ? CUFFT_Z2D : CUFFT_C2R;
  const Index count = b.outer * b.bins() * b.inner;
  const std::size_t cbytes = 2 * rs;
  // cuFFT's c2r overwrites its input: a copy unless the caller gives it up.
  std::optional<DeviceScratch<unsigned char>> scratch;
  unsigned char* zp = static_cast<unsigned char*>(const_cast<void*>(in));
  if (keep_input) {
    scratch.emplace(static_cast<std::size_t>(count) * cbytes);
    zp = scratch->get();
    TESSERA_CUDA_CHECK(cudaMemcpyAsync(zp, in, static_cast<std::size_t>(count) * cbytes,
                                       cudaMemcpyDeviceToDevice, st));
  }
  if (dbl)
    weigh(dev, reinterpret_cast<cuDoubleComplex*>(zp), b, 1.0, w, true);
  else
    weigh(dev, reinterpret_cast<cuComplex*>(zp), b, 1.0, w, true);
  const CachedPlan plan = get_plan(type, b);
  const cufftHandle h = plan.handle;
  cufft_check(cufftSetStream(h, st), "cufftSetStream");
  const WorkArea work(plan);
  const Index slice = b.inner == 1 ? b.outer * b.n : b.n * b.inner;
  std::optional<DeviceScratch<unsigned char>> aligned;
  per_slice(b, type, [&](Index io, Index oo) {
    unsigned char* dst = static_cast<unsigned char*>(out) + oo * rs;
    const bool direct = aligned_as_complex(dst, rs);
    if (!direct && !aligned) aligned.emplace(static_cast<std::size_t>(slice) * rs);
    void* x = direct ? dst : aligned->get();
    const cufftResult r =
        dbl ? cufftExecZ2D(h, reinterpret_cast<cuDoubleComplex*>(zp) + io, static_cast<double*>(x))
            : cufftExecC2R(h, reinterpret_cast<cuComplex*>(zp) + io, static_cast<float*>(x));
    cufft_check(
        r,
        (std::string(dbl ? "cufftExecZ2D" : "cufftExecC2R") + " of block " + block_str(b)).c_str());
    if (!direct)
      TESSERA_CUDA_CHECK(cudaMemcpyAsync(dst, x, static_cast<std::size_t>(slice) * rs,
                                         cudaMemcpyDeviceToDevice, st));
    device::count_launches(1);
  });
  if (dbl)
    scale_real(dev, static_cast<double*>(out), b.outer * b.n * b.inner, scale);
  else
    scale_real(dev, static_cast<float*>(out), b.outer * b.n * b.inner, scale);
}

void cuda::fft_c2c(const Device& dev, DType cplx, const FftBlock& b, const void* in, void* out,
                   int sign, double scale) {
  const bool dbl = cplx == DType::c128;
  if (b.n == 1) {  // the input itself, times the scale
    const Index count = b.outer * b.inner;
    const std::size_t bytes = static_cast<std::size_t>(count) * (dbl ? 16 : 8);
    if (in != out)
      TESSERA_CUDA_CHECK(cudaMemcpyAsync(out, in, bytes, cudaMemcpyDeviceToDevice, stream_of(dev)));
    if (dbl)
      scale_real(dev, static_cast<double*>(out), 2 * count, scale);
    else
      scale_real(dev, static_cast<float*>(out), 2 * count, scale);
    return;
  }
  const cufftType type = dbl ? CUFFT_Z2Z : CUFFT_C2C;
  const CachedPlan plan = get_plan(type, b);
  const cufftHandle h = plan.handle;
  cufft_check(cufftSetStream(h, stream_of(dev)), "cufftSetStream");
  const WorkArea work(plan);
  const int dir = sign < 0 ? CUFFT_FORWARD : CUFFT_INVERSE;
  per_slice(b, type, [&](Index io, Index oo) {
    if (dbl)
      cufft_check(cufftExecZ2Z(
                      h, const_cast<cuDoubleComplex*>(static_cast<const cuDoubleComplex*>(in)) + io,
                      static_cast<cuDoubleComplex*>(out) + oo, dir),
                  "cufftExecZ2Z");
    else
      cufft_check(cufftExecC2C(h, const_cast<cuComplex*>(static_cast<const cuComplex*>(in)) + io,
                               static_cast<cuComplex*>(out) + oo, dir),
                  "cufftExecC2C");
    device::count_launches(1);
  });
  const Index count = b.outer * b.n * b.inner;
  if (dbl)
    scale_real(dev, static_cast<double*>(out), 2 * count, scale);
  else
    scale_real(dev, static_cast<float*>(out), 2 * count, scale);
}

std::size_t cuda::fft_cached_plans() {
  std::lock_guard<std::mutex> lock(plan_lock);
  return plans.size();
}

}  // namespace tessera::kernels
