// Pooling on CUDA: the element functions of kernels/pool_impl.hpp, one launch each (max
// pooling backward: an argmax pass into a scratch buffer, then the gather).
#include "decomp/error.hpp"
#include "kernels/cuda/device_loops.cuh"
#include "kernels/dispatch.hpp"
#include "kernels/pool_impl.hpp"

namespace tessera::kernels {

void cuda::pool_forward(const Device& dev, const PoolDesc& d, const void* x, void* y) {
  const PoolGeom g = pool_geometry(d, "pool_forward_cuda");
  dispatch(d.type, [&](auto t) {
    using T = decltype(t);
    cuda_for_each(dev, g.out_count(),
                  PoolForward<T>{g, static_cast<const T*>(x), static_cast<T*>(y)},
                  "pool_forward_cuda");
  });
}

void cuda::pool_backward(const Device& dev, const PoolDesc& d, const void* x, const void* dy,
                         void* dx) {
  const PoolGeom g = pool_geometry(d, "pool_backward_cuda");
  TESSERA_CHECK(x || !g.max, "pool_backward_cuda: max pooling needs x");
  dispatch(d.type, [&](auto t) {
    using T = decltype(t);
    DeviceScratch<Index> arg(g.max ? static_cast<std::size_t>(g.out_count()) : 0);
    if (g.max)
      cuda_for_each(dev, g.out_count(), PoolArgmax<T>{g, static_cast<const T*>(x), arg.get()},
                    "pool_backward_cuda argmax");
    cuda_for_each(dev, g.in_count(),
                  PoolBackward<T>{g, arg.get(), static_cast<const T*>(dy), static_cast<T*>(dx)},
                  "pool_backward_cuda");
  });
}

}  // namespace tessera::kernels
