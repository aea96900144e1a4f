// Activations on CUDA: one launch over kernels/activation_impl.hpp.
#include "kernels/activation_impl.hpp"
#include "decomp/error.hpp"
#include "kernels/cuda/device_loops.cuh"
#include "kernels/dispatch.hpp"

namespace tessera::kernels {

void cuda::activation_forward(const Device& dev, Activation a, DType type, Index n, const void* x,
                              void* y) {
  TESSERA_CHECK(n >= 0, "activation_forward_cuda: negative count " << n);
  dispatch(type, [&](auto t) {
    using T = decltype(t);
    cuda_for_each(dev, n, ActivationForward<T>{a, static_cast<const T*>(x), static_cast<T*>(y)},
                  "activation_forward_cuda");
  });
}

void cuda::activation_backward(const Device& dev, Activation a, DType type, Index n, const void* x,
                               const void* dy, void* dx) {
  TESSERA_CHECK(n >= 0, "activation_backward_cuda: negative count " << n);
  dispatch(type, [&](auto t) {
    using T = decltype(t);
    cuda_for_each(dev, n,
                  ActivationBackward<T>{a, static_cast<const T*>(x), static_cast<const T*>(dy),
                                        static_cast<T*>(dx)},
                  "activation_backward_cuda");
  });
}

void cuda::activation_forward(const Device& dev, Activation a, DType type, const StridedCopy& map,
                              const void* x, void* y) {
  dispatch(type, [&](auto t) {
    using T = decltype(t);
    cuda_for_each(dev, map.count(),
                  ActivationForwardMapped<T>{a, map, static_cast<const T*>(x), static_cast<T*>(y)},
                  "activation_forward_cuda");
  });
}

void cuda::activation_backward(const Device& dev, Activation a, DType type, const StridedCopy& map,
                               const void* x, const void* dy, void* dx) {
  dispatch(type, [&](auto t) {
    using T = decltype(t);
    cuda_for_each(dev, map.count(),
                  ActivationBackwardMapped<T>{a, map, static_cast<const T*>(x),
                                              static_cast<const T*>(dy), static_cast<T*>(dx)},
                  "activation_backward_cuda");
  });
}

}  // namespace tessera::kernels
