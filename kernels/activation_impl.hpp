#pragma once
// Activation formulas and their derivatives, shared by the OpenMP loops and the CUDA
// kernels, evaluated in the element type (erff/expf/tanhf for float).
#include "kernels/floor.hpp"
#include "decomp/box.hpp"
#include "decomp/host_device.hpp"
#include "kernels/activation.hpp"
#include "kernels/hd_math.hpp"
#include "kernels/strided_index.hpp"

namespace tessera::kernels {

template <class T>
TESSERA_HD inline T activation_value(Activation a, T x) {
  switch (a) {
    case Activation::ReLU:
      return x > T(0) ? x : T(0);
    case Activation::GELU:
      return T(0.5) * x * (T(1) + hd_erf(x * T(0.70710678118654752440)));
    case Activation::SiLU:
      return x / (T(1) + hd_exp(-x));
    case Activation::Tanh:
      return hd_tanh(x);
  }
  return x;
}

template <class T>
TESSERA_HD inline T activation_derivative(Activation a, T x) {
  switch (a) {
    case Activation::ReLU:
      return x > T(0) ? T(1) : T(0);
    case Activation::GELU:  // Phi(x) + x phi(x)
      return T(0.5) * (T(1) + hd_erf(x * T(0.70710678118654752440))) +
             x * T(0.39894228040143267794) * hd_exp(T(-0.5) * x * x);
    case Activation::SiLU: {  // sigma(x) (1 + x (1 - sigma(x)))
      const T s = T(1) / (T(1) + hd_exp(-x));
      return s * (T(1) + x * (T(1) - s));
    }
    case Activation::Tanh: {
      const T t = hd_tanh(x);
      return T(1) - t * t;
    }
  }
  return T(0);
}

template <class T>
struct ActivationForward {
  Activation a;
  const T* x;
  T* y;
  TESSERA_HD void operator()(Index i) const { y[i] = activation_value(a, x[i]); }
};

template <class T>
struct ActivationBackward {
  Activation a;
  const T* x;
  const T* dy;
  T* dx;
  TESSERA_HD void operator()(Index i) const { dx[i] = dy[i] * activation_derivative(a, x[i]); }
};

// Over a strided map: x and dx at its src offsets, y and dy at its dst offsets (one
// division chain per element: the CUDA form; the host walks rows instead).
template <class T>
struct ActivationForwardMapped {
  Activation a;
  StridedCopy map;
  const T* x;
  T* y;
  TESSERA_HD void operator()(Index i) const {
    Index s = 0, d = 0;
    map.offsets(i, s, d);
    y[d] = activation_value(a, x[s]);
  }
};

template <class T>
struct ActivationBackwardMapped {
  Activation a;
  StridedCopy map;
  const T* x;
  const T* dy;
  T* dx;
  TESSERA_HD void operator()(Index i) const {
    Index s = 0, d = 0;
    map.offsets(i, s, d);
    dx[s] = dy[d] * activation_derivative(a, x[s]);
  }
};

}  // namespace tessera::kernels
