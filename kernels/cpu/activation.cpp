// Activations on the host: OpenMP loops over kernels/activation_impl.hpp.
#include "kernels/activation_impl.hpp"
#include "decomp/error.hpp"
#include "kernels/cpu/host_loops.hpp"
#include "kernels/dispatch.hpp"
#include "kernels/strided_copy.hpp"

namespace tessera::kernels {

void cpu::activation_forward(Activation a, DType type, Index n, const void* x, void* y) {
  TESSERA_CHECK(n >= 0, "activation_forward_cpu: negative count " << n);
  dispatch(type, [&](auto t) {
    using T = decltype(t);
    host_for_each(n, ActivationForward<T>{a, static_cast<const T*>(x), static_cast<T*>(y)});
  });
}

void cpu::activation_backward(Activation a, DType type, Index n, const void* x, const void* dy,
                              void* dx) {
  TESSERA_CHECK(n >= 0, "activation_backward_cpu: negative count " << n);
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
