// Entry points of kernels/reduce.hpp: one per op, dispatched once on the device.
#include "kernels/reduce.hpp"

namespace tessera::kernels {

double reduce_sum(const Device& dev, DType type, Index n, const void* x) {
  if (dev.is_host()) return cpu::reduce_sum(type, n, x);
  if constexpr (kCudaEnabled) return cuda::reduce_sum(dev, type, n, x);
  throw_without_cuda("reduce_sum");
}

double reduce_mean(const Device& dev, DType type, Index n, const void* x) {
  if (dev.is_host()) return cpu::reduce_mean(type, n, x);
  if constexpr (kCudaEnabled) return cuda::reduce_mean(dev, type, n, x);
  throw_without_cuda("reduce_mean");
}

double reduce_sum_squares(const Device& dev, DType type, Index n, const void* x) {
  if (dev.is_host()) return cpu::reduce_sum_squares(type, n, x);
  if constexpr (kCudaEnabled) return cuda::reduce_sum_squares(dev, type, n, x);
  throw_without_cuda("reduce_sum_squares");
}

void stat_sums(const Device& dev, const StatLayout& l, DType type, const void* x, double* sum,
               double* sumsq) {
  if (dev.is_host()) return cpu::stat_sums(l, type, x, sum, sumsq);
  if constexpr (kCudaEnabled) return cuda::stat_sums(dev, l, type, x, sum, sumsq);
  throw_without_cuda("stat_sums");
}

void channel_sums(const Device& dev, DType type, Index n, Index c, Index inner, const void* x,
                  double* sum, double* sumsq) {
  if (dev.is_host()) return cpu::channel_sums(type, n, c, inner, x, sum, sumsq);
  if constexpr (kCudaEnabled) return cuda::channel_sums(dev, type, n, c, inner, x, sum, sumsq);
  throw_without_cuda("channel_sums");
}

void group_sums(const Device& dev, DType type, Index n, Index c, Index groups, Index inner,
                const void* x, double* sum, double* sumsq) {
  if (dev.is_host()) return cpu::group_sums(type, n, c, groups, inner, x, sum, sumsq);
  if constexpr (kCudaEnabled)
    return cuda::group_sums(dev, type, n, c, groups, inner, x, sum, sumsq);
  throw_without_cuda("group_sums");
}

}  // namespace tessera::kernels
