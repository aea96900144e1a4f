// Entry points of kernels/elementwise.hpp: one per op, dispatched once on the device.
#include "kernels/elementwise.hpp"

namespace tessera::kernels {

void axpy(const Device& dev, DType s, Count n, double alpha, const void* x, void* y) {
  if (dev.is_host()) return cpu::axpy(s, n, alpha, x, y);
  if constexpr (kCudaEnabled) return cuda::axpy(dev, s, n, alpha, x, y);
  throw_without_cuda("axpy");
}

void scale(const Device& dev, DType s, Count n, double alpha, void* y) {
  if (dev.is_host()) return cpu::scale(s, n, alpha, y);
  if constexpr (kCudaEnabled) return cuda::scale(dev, s, n, alpha, y);
  throw_without_cuda("scale");
}

void scaled_diff(const Device& dev, DType s, Count n, double alpha, const void* a, const void* b,
                 void* out) {
  if (dev.is_host()) return cpu::scaled_diff(s, n, alpha, a, b, out);
  if constexpr (kCudaEnabled) return cuda::scaled_diff(dev, s, n, alpha, a, b, out);
  throw_without_cuda("scaled_diff");
}

double sum_squares(const Device& dev, DType s, Count n, const void* x) {
  if (dev.is_host()) return cpu::sum_squares(s, n, x);
  if constexpr (kCudaEnabled) return cuda::sum_squares(dev, s, n, x);
  throw_without_cuda("sum_squares");
}

double sum_sq_diff(const Device& dev, DType s, Count n, const void* a, const void* b) {
  if (dev.is_host()) return cpu::sum_sq_diff(s, n, a, b);
  if constexpr (kCudaEnabled) return cuda::sum_sq_diff(dev, s, n, a, b);
  throw_without_cuda("sum_sq_diff");
}

void add_f64(const Device& dev, DType s, Count n, const double* x, void* y) {
  if (dev.is_host()) return cpu::add_f64(s, n, x, y);
  if constexpr (kCudaEnabled) return cuda::add_f64(dev, s, n, x, y);
  throw_without_cuda("add_f64");
}

}  // namespace tessera::kernels
