// Entry points of kernels/norm.hpp: one per op, dispatched once on the device.
#include "kernels/norm.hpp"

namespace tessera::kernels {

void norm_forward(const Device& dev, const NormArgs& a, const void* x, void* y) {
  if (dev.is_host()) return cpu::norm_forward(a, x, y);
  if constexpr (kCudaEnabled) return cuda::norm_forward(dev, a, x, y);
  throw_without_cuda("norm_forward");
}

void norm_backward_sums(const Device& dev, const NormArgs& a, const void* x, const void* dy,
                        double* s1, double* s2) {
  if (dev.is_host()) return cpu::norm_backward_sums(a, x, dy, s1, s2);
  if constexpr (kCudaEnabled) return cuda::norm_backward_sums(dev, a, x, dy, s1, s2);
  throw_without_cuda("norm_backward_sums");
}

void norm_backward_dx(const Device& dev, const NormArgs& a, const void* x, const void* dy,
                      const double* S1, const double* S2, double M, void* dx) {
  if (dev.is_host()) return cpu::norm_backward_dx(a, x, dy, S1, S2, M, dx);
  if constexpr (kCudaEnabled) return cuda::norm_backward_dx(dev, a, x, dy, S1, S2, M, dx);
  throw_without_cuda("norm_backward_dx");
}

void norm_param_grads(const Device& dev, const NormArgs& a, const void* x, const void* dy,
                      double* dgamma, double* dbeta) {
  if (dev.is_host()) return cpu::norm_param_grads(a, x, dy, dgamma, dbeta);
  if constexpr (kCudaEnabled) return cuda::norm_param_grads(dev, a, x, dy, dgamma, dbeta);
  throw_without_cuda("norm_param_grads");
}

}  // namespace tessera::kernels
