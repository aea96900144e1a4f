// Channel bias on CUDA: one launch over kernels/bias_impl.hpp.
#include "kernels/bias.hpp"
#include "kernels/bias_impl.hpp"
#include "kernels/cuda/device_loops.cuh"
#include "kernels/dispatch.hpp"

namespace tessera::kernels {

void cuda::bias_add(const Device& dev, DType type, Index n, Index c, Index inner, void* y,
                    const void* b) {
  const StatLayout l = StatLayout::per_channel(n, c, inner);
  check_stat_layout(l, "bias_add_cuda");
  dispatch(type, [&](auto t) {
    using T = decltype(t);
    cuda_for_each(dev, l.elements(),
                  BiasAdd<T>{c, inner, static_cast<T*>(y), static_cast<const T*>(b)},
                  "bias_add_cuda");
  });
}

void cuda::bias_backward(const Device& dev, DType type, Index n, Index c, Index inner,
                         const void* dy, void* db) {
  const StatLayout l = StatLayout::per_channel(n, c, inner);
  check_stat_layout(l, "bias_backward_cuda");
  dispatch(type, [&](auto t) {
    using T = decltype(t);
    cuda_group_reduce(dev, l.count(), l.size(),
                      BiasGrad<T>{l, static_cast<const T*>(dy), static_cast<T*>(db)},
                      "bias_backward_cuda");
  });
}

}  // namespace tessera::kernels
