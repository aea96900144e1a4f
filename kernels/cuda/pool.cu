// Pooling on CUDA: one launch of the element functions of kernels/pool_impl.hpp.
#include "kernels/cuda/device_loops.cuh"
#include "kernels/dispatch.hpp"
#include "kernels/pool_impl.hpp"

namespace tessera::kernels {

void pool_forward_cuda(const PoolDesc& d, const void* x, void* y) {
  const PoolGeom g = pool_geometry(d, "pool_forward_cuda");
  dispatch(d.type, [&](auto t) {
    using T = decltype(t);
    cuda_for_each(g.out_count(),
                  PoolForward<T>{g, static_cast<const T*>(x), static_cast<T*>(y)},
                  "pool_forward_cuda");
  });
}

void pool_backward_cuda(const PoolDesc& d, const void* x, const void* dy, void* dx) {
  const PoolGeom g = pool_geometry(d, "pool_backward_cuda");
  dispatch(d.type, [&](auto t) {
    using T = decltype(t);
    cuda_for_each(g.in_count(),
                  PoolBackward<T>{g, static_cast<const T*>(x), static_cast<const T*>(dy),
                                  static_cast<T*>(dx)},
                  "pool_backward_cuda");
  });
}

}  // namespace tessera::kernels
