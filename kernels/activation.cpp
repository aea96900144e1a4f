#include "kernels/activation.hpp"

#include "decomp/error.hpp"

namespace tessera::kernels {

const char* name_of(Activation a) {
  switch (a) {
    case Activation::ReLU:
      return "relu";
    case Activation::GELU:
      return "gelu";
    case Activation::SiLU:
      return "silu";
    case Activation::Tanh:
      return "tanh";
  }
  return "?";
}

void check_activation(Activation a) {
  TESSERA_CHECK(name_of(a)[0] != '?',
                "activation: unknown kind " << static_cast<int>(a) << " (relu, gelu, silu, tanh)");
}

void activation_forward(const Device& dev, Activation a, DType type, Index n, const void* x,
                        void* y) {
  check_activation(a);
  if (dev.is_host()) return cpu::activation_forward(a, type, n, x, y);
  if constexpr (kCudaEnabled) return cuda::activation_forward(dev, a, type, n, x, y);
  throw_without_cuda("activation_forward");
}

void activation_backward(const Device& dev, Activation a, DType type, Index n, const void* x,
                         const void* dy, void* dx) {
  check_activation(a);
  if (dev.is_host()) return cpu::activation_backward(a, type, n, x, dy, dx);
  if constexpr (kCudaEnabled) return cuda::activation_backward(dev, a, type, n, x, dy, dx);
  throw_without_cuda("activation_backward");
}

void activation_forward(const Device& dev, Activation a, DType type, const StridedCopy& map,
                        const void* x, void* y) {
  check_activation(a);
  if (dev.is_host()) return cpu::activation_forward(a, type, map, x, y);
  if constexpr (kCudaEnabled) return cuda::activation_forward(dev, a, type, map, x, y);
  throw_without_cuda("activation_forward");
}

void activation_backward(const Device& dev, Activation a, DType type, const StridedCopy& map,
                         const void* x, const void* dy, void* dx) {
  check_activation(a);
  if (dev.is_host()) return cpu::activation_backward(a, type, map, x, dy, dx);
  if constexpr (kCudaEnabled) return cuda::activation_backward(dev, a, type, map, x, dy, dx);
  throw_without_cuda("activation_backward");
}

}  // namespace tessera::kernels
