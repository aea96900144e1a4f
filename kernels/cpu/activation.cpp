// Activations on the host: OpenMP loops over kernels/activation_impl.hpp.
#include "kernels/activation_impl.hpp"
#include "decomp/error.hpp"
#include "kernels/cpu/host_loops.hpp"
#include "kernels/dispatch.hpp"

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

}  // namespace tessera::kernels
