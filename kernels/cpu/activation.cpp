// Activations on the host: OpenMP loops over kernels/activation_impl.hpp.
#include "kernels/activation_impl.hpp"

#include <algorithm>

#include "decomp/error.hpp"
#include "kernels/cpu/host_loops.hpp"
#include "kernels/cpu/simd_clones.hpp"
#include "kernels/dispatch.hpp"
#include "kernels/strided_copy.hpp"

// float32 runs go through loops with the activation fixed at compile time, built also for
// AVX-512 and AVX2; where glibc's vector math library exists (TESSERA_HAVE_MVEC), erff, expf
// and tanhf are declared with their SIMD variants, so GELU, SiLU and tanh vectorize (the
// scalar erff was a tenth of a UNet step). The variants are accurate to a few ulp, as the
// scalar calls; float64 keeps the scalar loops.
#if defined(TESSERA_HAVE_MVEC) && defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
extern "C" {
#pragma omp declare simd notinbranch
float erff(float) noexcept;
#pragma omp declare simd notinbranch
float expf(float) noexcept;
#pragma omp declare simd notinbranch
float tanhf(float) noexcept;
}
#define TESSERA_ACT_CLONES TESSERA_SIMD_CLONES
#else
#define TESSERA_ACT_CLONES
#endif

namespace tessera::kernels {
namespace {

template <Activation A>
inline void forward_run(const float* x, Index xs, float* y, Index ys, Index n) {
#pragma omp simd
  for (Index k = 0; k < n; ++k) y[k * ys] = activation_value(A, x[k * xs]);
}

template <Activation A>
inline void backward_run(const float* x, Index xs, const float* dy, Index ds, float* dx, Index n) {
#pragma omp simd
  for (Index k = 0; k < n; ++k) dx[k * xs] = dy[k * ds] * activation_derivative(A, x[k * xs]);
}

// y[k ys] = f(x[k xs]) for k < n.
TESSERA_ACT_CLONES
void float_forward(Activation a, const float* x, Index xs, float* y, Index ys, Index n) {
  switch (a) {
    case Activation::ReLU:
      return forward_run<Activation::ReLU>(x, xs, y, ys, n);
    case Activation::GELU:
      return forward_run<Activation::GELU>(x, xs, y, ys, n);
    case Activation::SiLU:
      return forward_run<Activation::SiLU>(x, xs, y, ys, n);
    case Activation::Tanh:
      return forward_run<Activation::Tanh>(x, xs, y, ys, n);
  }
}

// dx[k xs] = dy[k ds] f'(x[k xs]) for k < n.
TESSERA_ACT_CLONES
void float_backward(Activation a, const float* x, Index xs, const float* dy, Index ds, float* dx,
                    Index n) {
  switch (a) {
    case Activation::ReLU:
      return backward_run<Activation::ReLU>(x, xs, dy, ds, dx, n);
    case Activation::GELU:
      return backward_run<Activation::GELU>(x, xs, dy, ds, dx, n);
    case Activation::SiLU:
      return backward_run<Activation::SiLU>(x, xs, dy, ds, dx, n);
    case Activation::Tanh:
      return backward_run<Activation::Tanh>(x, xs, dy, ds, dx, n);
  }
}

// Contiguous float32 elements in blocks, OpenMP over the blocks.
constexpr Index kRun = 4096;
template <class Fn>
void for_runs(Index n, const Fn& fn) {
#pragma omp parallel for schedule(static)
  for (Index b = 0; b < (n + kRun - 1) / kRun; ++b) fn(b * kRun, std::min(kRun, n - b * kRun));
}

}  // namespace

void cpu::activation_forward(Activation a, DType type, Index n, const void* x, void* y) {
  TESSERA_CHECK(n >= 0, "activation_forward_cpu: negative count " << n);
  if (type == DType::f32) {
    const auto* xs = static_cast<const float*>(x);
    auto* ys = static_cast<float*>(y);
    return for_runs(n, [&](Index o, Index m) { float_forward(a, xs + o, 1, ys + o, 1, m); });
  }
  dispatch(type, [&](auto t) {
    using T = decltype(t);
    host_for_each(n, ActivationForward<T>{a, static_cast<const T*>(x), static_cast<T*>(y)});
  });
}

void cpu::activation_backward(Activation a, DType type, Index n, const void* x, const void* dy,
                              void* dx) {
  TESSERA_CHECK(n >= 0, "activation_backward_cpu: negative count " << n);
  if (type == DType::f32) {
    const auto* xs = static_cast<const float*>(x);
    const auto* g = static_cast<const float*>(dy);
    auto* out = static_cast<float*>(dx);
    return for_runs(n,
                    [&](Index o, Index m) { float_backward(a, xs + o, 1, g + o, 1, out + o, m); });
  }
  dispatch(type, [&](auto t) {
    using T = decltype(t);
    host_for_each(n, ActivationBackward<T>{a, static_cast<const T*>(x), static_cast<const T*>(dy),
                                           static_cast<T*>(dx)});
  });
}

namespace {
// Rows of the simplified map (innermost runs contiguous on both sides when the views are
// the interior of a padded buffer and a plain tensor), OpenMP over rows; fn(so, do, n, ss, ds).
template <class Fn>
void for_rows(const StridedCopy& map, const Fn& fn) {
  const StridedCopy c = simplify(map);
  if (c.count() == 0) return;
  const int in = c.ndim - 1;
  Index rows = 1;
  for (int d = 0; d < in; ++d) rows *= c.shape[d];
#pragma omp parallel for schedule(static)
  for (Index r = 0; r < rows; ++r) {
    Index so = 0, dof = 0, k = r;
    for (int d = in - 1; d >= 0; --d) {
      so += (k % c.shape[d]) * c.src_stride[d];
      dof += (k % c.shape[d]) * c.dst_stride[d];
      k /= c.shape[d];
    }
    fn(so, dof, c.shape[in], c.src_stride[in], c.dst_stride[in]);
  }
}
}  // namespace

void cpu::activation_forward(Activation a, DType type, const StridedCopy& map, const void* x,
                             void* y) {
  if (type == DType::f32) {
    const auto* xs = static_cast<const float*>(x);
    auto* ys = static_cast<float*>(y);
    return for_rows(map, [&](Index so, Index dof, Index n, Index ss, Index ds) {
      float_forward(a, xs + so, ss, ys + dof, ds, n);
    });
  }
  dispatch(type, [&](auto t) {
    using T = decltype(t);
    const T* xs = static_cast<const T*>(x);
    T* ys = static_cast<T*>(y);
    for_rows(map, [&](Index so, Index dof, Index n, Index ss, Index ds) {
      for (Index k = 0; k < n; ++k) ys[dof + k * ds] = activation_value(a, xs[so + k * ss]);
    });
  });
}

void cpu::activation_backward(Activation a, DType type, const StridedCopy& map, const void* x,
                              const void* dy, void* dx) {
  if (type == DType::f32) {
    const auto* xs = static_cast<const float*>(x);
    const auto* g = static_cast<const float*>(dy);
    auto* out = static_cast<float*>(dx);
    return for_rows(map, [&](Index so, Index dof, Index n, Index ss, Index ds) {
      float_backward(a, xs + so, ss, g + dof, ds, out + so, n);
    });
  }
  dispatch(type, [&](auto t) {
    using T = decltype(t);
    const T* xs = static_cast<const T*>(x);
    const T* g = static_cast<const T*>(dy);
    T* out = static_cast<T*>(dx);
    for_rows(map, [&](Index so, Index dof, Index n, Index ss, Index ds) {
      for (Index k = 0; k < n; ++k)
        out[so + k * ss] = g[dof + k * ds] * activation_derivative(a, xs[so + k * ss]);
    });
  });
}

}  // namespace tessera::kernels
