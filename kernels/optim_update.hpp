#pragma once
// Optimizer updates, one element at a time, written once for host and device
// (TESSERA_HD). The formulas are PyTorch's (torch.optim.SGD, Adam, AdamW with
// amsgrad=False, maximize=False), evaluated in the parameter's precision.
#include "kernels/floor.hpp"
#include "kernels/device/device.hpp"
#include <cmath>

#include "decomp/host_device.hpp"
#include "kernels/elementwise.hpp"

namespace tessera::kernels {

struct SgdArgs {
  double lr = 0, momentum = 0, dampening = 0, weight_decay = 0;
  bool nesterov = false;
  bool first_step = false;  // momentum buffer starts as the first gradient
};

struct AdamArgs {
  double lr = 0, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
  bool decoupled = false;  // AdamW: decay the parameter, not the gradient
  double bias_correction1 = 1, bias_correction2_sqrt = 1;  // 1 - beta1^t, sqrt(1 - beta2^t)
};

template <class T>
TESSERA_HD inline T sqrt_of(T x) {
#if defined(__CUDA_ARCH__)
  return sqrt(x);
#else
  return std::sqrt(x);
#endif
}

template <class T>
TESSERA_HD inline void sgd_element(T& p, T g, T& buf, const SgdArgs& a) {
  if (a.weight_decay != 0) g = g + static_cast<T>(a.weight_decay) * p;
  if (a.momentum != 0) {
    if (a.first_step)
      buf = g;
    else
      buf = static_cast<T>(a.momentum) * buf + static_cast<T>(1 - a.dampening) * g;
    g = a.nesterov ? g + static_cast<T>(a.momentum) * buf : buf;
  }
  p = p - static_cast<T>(a.lr) * g;
}

template <class T>
TESSERA_HD inline void adam_element(T& p, T g, T& m, T& v, const AdamArgs& a) {
  if (a.decoupled)
    p = p * static_cast<T>(1 - a.lr * a.weight_decay);
  else if (a.weight_decay != 0)
    g = g + static_cast<T>(a.weight_decay) * p;
  m = m + static_cast<T>(1 - a.beta1) * (g - m);  // torch: exp_avg.lerp_(grad, 1 - beta1)
  v = static_cast<T>(a.beta2) * v + static_cast<T>(1 - a.beta2) * g * g;
  const T denom = sqrt_of(v) / static_cast<T>(a.bias_correction2_sqrt) + static_cast<T>(a.eps);
  p = p - static_cast<T>(a.lr / a.bias_correction1) * m / denom;
}

// buf may be null when momentum == 0.
void sgd_update(const Device& dev, DType s, Count n, void* p, const void* g, void* buf,
                const SgdArgs& a);
void adam_update(const Device& dev, DType s, Count n, void* p, const void* g, void* m, void* v,
                 const AdamArgs& a);

// The backends behind the entry points above (the entry dispatches on dev.space):
// host loops, oneDNN, OpenMP ...
namespace cpu {
void sgd_update(DType s, Count n, void* p, const void* g, void* buf, const SgdArgs& a);
void adam_update(DType s, Count n, void* p, const void* g, void* m, void* v, const AdamArgs& a);
}  // namespace cpu
// ... and CUDA, defined only where Tessera is built with CUDA (kCudaEnabled): every pointer
// is a device pointer, work is queued on dev.stream, and a result returned to the host (a
// sum) is waited for.
namespace cuda {
void sgd_update(const Device& dev, DType s, Count n, void* p, const void* g, void* buf,
                const SgdArgs& a);
void adam_update(const Device& dev, DType s, Count n, void* p, const void* g, void* m, void* v,
                 const AdamArgs& a);
}  // namespace cuda

}  // namespace tessera::kernels
