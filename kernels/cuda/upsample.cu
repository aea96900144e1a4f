// Upsampling on CUDA: one launch of the element functions of kernels/upsample_impl.hpp.
#include "kernels/cuda/device_loops.cuh"
#include "kernels/dispatch.hpp"
#include "kernels/upsample_impl.hpp"

namespace tessera::kernels {

void cuda::upsample_forward(const Device& dev, const UpsampleDesc& d, const void* x, void* y) {
  const UpsampleGeom g = upsample_geometry(d, "upsample_forward_cuda");
  dispatch(d.type, [&](auto t) {
    using T = decltype(t);
    cuda_for_each(dev, g.out_count(),
                  UpsampleForward<T>{g, static_cast<const T*>(x), static_cast<T*>(y)},
                  "upsample_forward_cuda");
  });
}

void cuda::upsample_backward(const Device& dev, const UpsampleDesc& d, const void* dy, void* dx) {
  const UpsampleGeom g = upsample_geometry(d, "upsample_backward_cuda");
  dispatch(d.type, [&](auto t) {
    using T = decltype(t);
    cuda_for_each(dev, g.in_count(),
                  UpsampleBackward<T>{g, static_cast<const T*>(dy), static_cast<T*>(dx)},
                  "upsample_backward_cuda");
  });
}

}  // namespace tessera::kernels
