// Padding on CUDA: one launch of the element functions of kernels/pad_impl.hpp.
#include "kernels/cuda/device_loops.cuh"
#include "kernels/dispatch.hpp"
#include "kernels/pad_impl.hpp"

namespace tessera::kernels {

void cuda::pad_forward(const Device& dev, const PadDesc& d, const void* x, void* y) {
  const PadGeom g = pad_geometry(d, "pad_forward_cuda");
  dispatch(d.type, [&](auto t) {
    using T = decltype(t);
    cuda_for_each(dev, g.out_count(),
                  PadForward<T>{g, static_cast<const T*>(x), static_cast<T*>(y)},
                  "pad_forward_cuda");
  });
}

void cuda::pad_backward(const Device& dev, const PadDesc& d, const void* dy, void* dx) {
  const PadGeom g = pad_geometry(d, "pad_backward_cuda");
  dispatch(d.type, [&](auto t) {
    using T = decltype(t);
    cuda_for_each(dev, g.in_count(),
                  PadBackward<T>{g, static_cast<const T*>(dy), static_cast<T*>(dx)},
                  "pad_backward_cuda");
  });
}

}  // namespace tessera::kernels
